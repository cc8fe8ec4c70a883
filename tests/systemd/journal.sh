# The journal queries packaging/README.md documents, and the pod's name in a
# plain `journalctl -u staticpodd` line; sourced by check.sh (boot 1), which
# defines check, until_ok, $pod (default/web-appliance, container httpd).
# The README's queries name kube-system/etcd-node1/etcd: these are the same
# queries, field for field, on this machine's pod.
journal_queries() {
	check "journal: POD_NAME=$pod matches its lines" sh -c "[ -n \"\$(journalctl -u staticpodd -b --no-pager -o cat POD_NAME=$pod)\" ]"
	check "journal: POD=default/$pod CONTAINER=httpd matches its lines" sh -c "[ -n \"\$(journalctl -u staticpodd -b --no-pager -o cat POD=default/$pod CONTAINER=httpd)\" ]"
	check "journal: NAMESPACE=default matches its lines" sh -c "[ -n \"\$(journalctl -u staticpodd -b --no-pager -o cat NAMESPACE=default)\" ]"
	# POD= holds namespace/name: the name alone matches nothing (the
	# README's old query).
	check "journal: POD=$pod (no namespace) matches nothing" sh -c "[ -z \"\$(journalctl -u staticpodd -b --no-pager -o cat POD=$pod)\" ]"
	# The default short output: the container's start names pod and container.
	check "journal: the short output names the pod and container" sh -c \
		"journalctl -u staticpodd -b --no-pager | grep 'container started' | grep -q 'pod=\"default/$pod\" container=\"httpd\"'"
	say "journal, short output of the pod's lines:"
	journalctl -u staticpodd -b --no-pager POD=default/$pod | head -8 | cut -c1-200
}
