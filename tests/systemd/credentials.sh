# Control-plane keys from systemd credentials under a real systemd, sourced by
# check.sh (its say/ok/bad/check/until_ok/mainpid), with kubeadm, kubectl and the
# etcd and kube-apiserver images in the share.
#
# The real kubeadm (init --dry-run) makes a one-node control plane's
# certificates, keys and manifests in a directory under /run, a tmpfs, so that
# no private key is ever written to the root filesystem. Each key etcd and the
# API server read (the serving keys, the clients', the service-account signing
# key) is sealed by systemd-creds into /etc/credstore.encrypted; then every
# clear key goes (the CAs' keys with them: nothing here signs again) and only
# the certificates and sa.pub are copied to the disk. A drop-in gives the
# sealed files to staticpodd.service with LoadCredentialEncrypted=; kubeadm's
# etcd and kube-apiserver manifests, rewritten to read their keys from a secret
# volume instead of /etc/kubernetes/pki, come with Secrets whose values are
# those credentials (staticpodd.io/credentials).
# This guest has no TPM (qemu is given none): the credentials are sealed with
# the host key (--with-key=host, /var/lib/systemd/credential.secret), which
# binds them to this machine's disk; on a machine with a TPM2, --with-key=tpm2
# (or host+tpm2) is the same command.
#
# What is checked: the API server answers /readyz over TLS with the serving
# certificate kubeadm made (kubectl verifies it against the cluster's CA, whose
# key is gone, and the handshake proves the key); a token signed with the
# service-account key from the credential authenticates; the keys the
# containers read are the keys that were sealed; and no file of the root
# filesystem holds any of the keys, in PEM or in base64 of the PEM, the sealed
# files included. Where the keys are in clear is memory: the unit's credentials
# directory (ramfs, systemd's) and the pods' secret volumes (tmpfs).

# cred_dir: where the proof keeps what must not be on the disk (/run is a
# tmpfs): kubeadm's config, the super-admin kubeconfig (it holds a client key),
# the keys' checksums and the grep patterns made from them.
cred_dir=/run/credentials-proof
credstore=/etc/credstore.encrypted
# The keys each Secret holds, as key=credential pairs (key: the name in the
# secret volume; credential: the name in $CREDENTIALS_DIRECTORY), and the file
# kubeadm writes each to under /etc/kubernetes/pki.
apiserver_keys="apiserver.key=apiserver.key apiserver-etcd-client.key=apiserver-etcd-client.key apiserver-kubelet-client.key=apiserver-kubelet-client.key front-proxy-client.key=front-proxy-client.key sa.key=sa.key"
etcd_keys="server.key=etcd-server.key peer.key=etcd-peer.key"
cred_file() { # cred_file CREDENTIAL: the file kubeadm wrote it to, under pki/
	case $1 in etcd-*) echo "etcd/${1#etcd-}" ;; *) echo "$1" ;; esac
}
cp_ready() { staticpodd ps 2>/dev/null | grep -E "^kube-system +$1-appliance +1/1 +Running " >/dev/null; }
cp_gone() { ! staticpodd ps 2>/dev/null | grep -q -E "^kube-system +$1-appliance "; }
kc() { "$share/kubectl" --kubeconfig "$gen/super-admin.conf" "$@"; }

# credentials_seal: the keys made in memory, sealed, the drop-in in place and
# staticpodd restarted with the credentials.
credentials_seal() {
	t0=$(uptime_s)
	mkdir -p $cred_dir $credstore /etc/kubernetes/pki
	chmod 700 $cred_dir $credstore
	say "credentials: TPM2: $(systemd-creds has-tpm2 2>&1 | head -1) (systemd-creds has-tpm2)"
	# The images go in meanwhile (emulated, the API server's takes half a minute).
	(staticpodd images import $share/etcd.tar && staticpodd images import $share/kube-apiserver.tar) >$cred_dir/import.out 2>&1 &
	import=$!
	# The node's address, as kubeadm's manifests probe it: a dummy interface
	# (the guest has no network card).
	ip link add cp0 type dummy && ip addr add 10.0.2.15/24 dev cp0 && ip link set cp0 up
	cat >$cred_dir/kubeadm.yaml <<-'CFG'
	apiVersion: kubeadm.k8s.io/v1beta4
	kind: InitConfiguration
	localAPIEndpoint: {advertiseAddress: 10.0.2.15, bindPort: 6443}
	nodeRegistration: {name: appliance, criSocket: "unix:///run/staticpodd/cri.sock"}
	---
	apiVersion: kubeadm.k8s.io/v1beta4
	kind: ClusterConfiguration
	kubernetesVersion: v1.37.2
	# ECDSA keys: RSA's key generation takes seconds each in emulation.
	encryptionAlgorithm: ECDSA-P256
	CFG
	# kubeadm init --dry-run writes what it would write (certificates and
	# keys, the super-admin kubeconfig, the manifests, which name
	# /etc/kubernetes/pki as without it) into $KUBEADM_INIT_DRYRUN_DIR: one
	# run of kubeadm, its phases up to the manifests, all into memory.
	gen=$cred_dir/kubeadm
	mkdir -p $gen
	check "credentials: kubeadm init --dry-run, into $gen (a tmpfs)" sh -c "KUBEADM_INIT_DRYRUN_DIR=$gen $share/kubeadm init \
		--config $cred_dir/kubeadm.yaml --dry-run --skip-phases=preflight,kubeconfig/admin,kubeconfig/kubelet,kubeconfig/controller-manager,kubeconfig/scheduler,control-plane/controller-manager,control-plane/scheduler,kubelet-start,wait-control-plane,upload-config,upload-certs,mark-control-plane,bootstrap-token,kubelet-finalize,addon,show-join-command \
		>$cred_dir/kubeadm.out 2>&1 || { tail -20 $cred_dir/kubeadm.out; exit 1; }"
	say "TIMING credentials: kubeadm took $(since "$t0")s"
	: >$cred_dir/patterns
	: >$cred_dir/sums
	: >$cred_dir/dropin
	for pair in $apiserver_keys $etcd_keys; do
		cred=${pair#*=}
		f=$gen/$(cred_file "$cred")
		# What finds the key in a file: its first PEM line (it holds the
		# private scalar), and the same bytes in base64 of the whole PEM file,
		# as JSON stores a []byte.
		sed -n 2p "$f" >>$cred_dir/patterns
		base64 -w0 "$f" | cut -c61-120 >>$cred_dir/patterns
		echo "$(sha256sum <"$f" | cut -d' ' -f1) $cred" >>$cred_dir/sums
		check "credentials: systemd-creds encrypt --with-key=host $cred" \
			sh -c "systemd-creds encrypt --with-key=host --name=$cred $f $credstore/$cred 2>$cred_dir/creds.err || { cat $cred_dir/creds.err; exit 1; }"
		echo "LoadCredentialEncrypted=$cred:$credstore/$cred" >>$cred_dir/dropin
	done
	# (systemd-creds warns that credential.secret is not on encrypted media:
	# this test's disk is not.)
	say "credentials: systemd-creds said: $(sort -u $cred_dir/creds.err)"
	# The certificates and sa.pub to the disk; the clear keys (the CAs' too) gone.
	(cd $gen && find . \( -name '*.crt' -o -name sa.pub \) -exec cp --parents {} /etc/kubernetes/pki/ \;)
	find $gen -name '*.key' -delete
	check "credentials: no key in /etc/kubernetes/pki" sh -c '[ -z "$(find /etc/kubernetes/pki -name "*.key")" ]'
	say "credentials: /etc/kubernetes/pki: $(cd /etc/kubernetes/pki && find . -type f | sort | tr '\n' ' ')"

	mkdir -p /etc/systemd/system/staticpodd.service.d
	{ echo '[Service]'; cat $cred_dir/dropin; } >/etc/systemd/system/staticpodd.service.d/credentials.conf
	systemctl daemon-reload
	old=$(mainpid)
	check "credentials: staticpodd restarts with LoadCredentialEncrypted=" systemctl restart staticpodd
	check "credentials: a new daemon is active" until_ok 60 new_mainpid "$old"
	env_dir=$(tr '\0' '\n' </proc/"$(mainpid)"/environ | sed -n 's/^CREDENTIALS_DIRECTORY=//p')
	say "credentials: the daemon's CREDENTIALS_DIRECTORY=$env_dir ($(stat -fc %T "$env_dir" 2>&1))"
	check "credentials: \$CREDENTIALS_DIRECTORY is the unit's" [ "$env_dir" = /run/credentials/staticpodd.service ]
	while read -r sum cred; do
		check "credentials: $cred decrypted into \$CREDENTIALS_DIRECTORY is the key sealed" \
			[ "$(sha256sum <"$env_dir/$cred" | cut -d' ' -f1)" = "$sum" ]
	done <$cred_dir/sums
	check "credentials: the sealed files hold no key in clear" sh -c "! grep -q -F -f $cred_dir/patterns $credstore/*"
	say "TIMING credentials: keys made, sealed and loaded in $(since "$t0")s"
}

# secret NAME PAIRS: the Secret in kube-system whose keys are the credentials of PAIRS.
secret() {
	printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: kube-system\n' "$1"
	printf '  annotations:\n    staticpodd.io/credentials: "%s"\ntype: Opaque\n' "$(echo $2 | tr ' ' ,)"
}

# rewrite NAME SECRET: kubeadm's manifest NAME.yaml from stdin, with each private
# key flag pointing into a secret volume of SECRET at /etc/kubernetes/keys
# instead of into /etc/kubernetes/pki; the certificates stay where they are.
# One more change, for emulation: the startup probe allows 10 minutes, not
# kubeadm's 4 (24 x 10s), which a busy machine's emulated API server has
# taken to answer /livez.
rewrite() {
	sed -e 's#=/etc/kubernetes/pki/\(etcd/\)\{0,1\}\([a-z-]*\)\.key$#=/etc/kubernetes/keys/\2.key#' \
		-e '/^    startupProbe:$/,/^    [a-z]/ s/^      failureThreshold: 24$/      failureThreshold: 60/' |
		awk -v secret="$2" '
			{ print }
			/^    volumeMounts:$/ { print "    - mountPath: /etc/kubernetes/keys\n      name: keys\n      readOnly: true" }
			/^  volumes:$/ { print "  - name: keys\n    secret:\n      secretName: " secret "\n      defaultMode: 0400" }'
}

# put FILE: stdin into the manifest FILE.
put() {
	cat >/etc/kubernetes/manifests/."$1" && mv /etc/kubernetes/manifests/."$1" /etc/kubernetes/manifests/"$1"
}

# credentials_controlplane: etcd and the API server from kubeadm's manifests,
# rewritten, beside their Secrets; what they serve with.
credentials_controlplane() {
	t0=$(uptime_s)
	# (check's status is 0 whatever the command's: bad only records a failure.)
	wait $import
	imported=$?
	check "credentials: etcd and kube-apiserver images imported" [ $imported = 0 ]
	[ $imported = 0 ] || cat $cred_dir/import.out
	say "TIMING credentials: waited $(since "$t0")s more for the images"
	# Each file written whole (a dot-file the source ignores, renamed), the
	# Secrets before the pods that use them.
	secret etcd-keys "$etcd_keys" | put etcd-keys.yaml
	secret kube-apiserver-keys "$apiserver_keys" | put kube-apiserver-keys.yaml
	rewrite etcd etcd-keys <$gen/etcd.yaml | put etcd.yaml
	rewrite kube-apiserver kube-apiserver-keys <$gen/kube-apiserver.yaml | put kube-apiserver.yaml
	grep -E 'key|keys' /etc/kubernetes/manifests/kube-apiserver.yaml | sed 's/^/  kube-apiserver.yaml| /'
	sed 's/^/  kube-apiserver-keys.yaml| /' /etc/kubernetes/manifests/kube-apiserver-keys.yaml
	t1=$(uptime_s)
	check "credentials: etcd is Ready" until_ok 180 cp_ready etcd
	say "TIMING credentials: etcd Ready $(since "$t1")s after its manifest"
	check "credentials: kube-apiserver is Ready" until_ok 600 cp_ready kube-apiserver
	say "TIMING credentials: kube-apiserver Ready $(since "$t1")s after its manifest"
	staticpodd ps | grep -E '^NAMESPACE|kube-system'
	cp_ready kube-apiserver || staticpodd logs --timestamps --tail 40 kube-apiserver-appliance

	# The API server's serving certificate is the only one of the cluster's CA
	# for server authentication, and the CA's key is gone: a TLS handshake
	# that kubectl verifies against ca.crt is made with apiserver.key.
	check "credentials: /readyz over TLS, verified against the cluster's CA" sh -c "[ \"\$($share/kubectl --kubeconfig $gen/super-admin.conf get --raw /readyz 2>&1)\" = ok ]"
	# A token the API server signs with sa.key authenticates (it verifies it with sa.pub).
	kc create serviceaccount proof -n default >/dev/null 2>&1
	tok=$(kc create token proof -n default 2>/dev/null)
	who=$("$share/kubectl" --kubeconfig /dev/null --server https://10.0.2.15:6443 --certificate-authority /etc/kubernetes/pki/ca.crt \
		--token "$tok" auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1)
	say "credentials: the token's user: $who"
	check "credentials: a service-account token signed with the credential's key authenticates" [ "$who" = system:serviceaccount:default:proof ]

	api=$(pgrep -x kube-apiserver | head -1)
	say "credentials: kube-apiserver pid $api: $(tr '\0' ' ' </proc/"$api"/cmdline | grep -o -- '--[a-z-]*key-file=[^ ]*\|--[a-z-]*client-key=[^ ]*' | tr '\n' ' ')"
	check "credentials: the API server reads its serving key from the secret volume" \
		sh -c "tr '\0' '\n' </proc/$api/cmdline | grep -qx -- --tls-private-key-file=/etc/kubernetes/keys/apiserver.key"
	check "credentials: the API server reads its service-account signing key from the secret volume" \
		sh -c "tr '\0' '\n' </proc/$api/cmdline | grep -qx -- --service-account-signing-key-file=/etc/kubernetes/keys/sa.key"
	# mountinfo's type is the field after "-": the optional fields before it
	# are zero or more (shared:, master:), and the source, after the type, is
	# "tmpfs" too.
	check "credentials: the secret volume is a tmpfs" sh -c "awk '\$5 == \"/etc/kubernetes/keys\" { for (i = 7; \$i != \"-\"; i++); print \$(i + 1) }' /proc/$api/mountinfo | grep -qx tmpfs"
	say "credentials: the secret volume: $(ls -l /proc/"$api"/root/etc/kubernetes/keys/ | tr '\n' ' ')"
	check "credentials: the keys are 0400" sh -c "[ \"\$(stat -L -c %a /proc/$api/root/etc/kubernetes/keys/apiserver.key)\" = 400 ]"
	etcd=$(pgrep -x etcd | head -1)
	while read -r sum cred; do
		case $cred in etcd-*) cpid=$etcd key=${cred#etcd-} ;; *) cpid=$api key=$cred ;; esac
		check "credentials: the container's $key is the credential $cred" \
			[ "$(sha256sum </proc/"$cpid"/root/etc/kubernetes/keys/"$key" | cut -d' ' -f1)" = "$sum" ]
	done <$cred_dir/sums

	# No key on the root filesystem (-xdev: /proc, /sys, /run, the credentials'
	# ramfs and the secret volumes' tmpfs are other filesystems, all memory).
	# The patterns find the keys where they are in memory: the grep works.
	t1=$(uptime_s)
	check "credentials: the grep finds the keys in \$CREDENTIALS_DIRECTORY" sh -c \
		"[ \$(grep -l -F -f $cred_dir/patterns /run/credentials/staticpodd.service/* | wc -l) = $(wc -l <$cred_dir/sums) ]"
	find / -xdev -type f -print0 | xargs -0 grep -l -F -f $cred_dir/patterns >$cred_dir/found 2>/dev/null
	say "credentials: the root filesystem ($(findmnt -n -o SOURCE,FSTYPE /)), $(find / -xdev -type f | wc -l) files, grepped in $(since "$t1")s: $(wc -l <$cred_dir/found) with a key"
	sed 's/^/  has a key: /' $cred_dir/found
	check "credentials: no file of the root filesystem holds a key" [ ! -s $cred_dir/found ]
	say "TIMING credentials: control plane checked in $(since "$t0")s"
}

# credentials_cleanup: the control plane and its Secrets gone, before the
# purge and power-off that follow.
credentials_cleanup() {
	rm -f /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/manifests/etcd.yaml \
		/etc/kubernetes/manifests/kube-apiserver-keys.yaml /etc/kubernetes/manifests/etcd-keys.yaml
	check "credentials: kube-apiserver removed" until_ok 120 cp_gone kube-apiserver
	check "credentials: etcd removed" until_ok 120 cp_gone etcd
	rm -rf $cred_dir
}

credentials_check() {
	credentials_seal
	credentials_controlplane
	credentials_cleanup
}
