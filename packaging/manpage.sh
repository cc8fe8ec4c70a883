#!/bin/sh
# Writes staticpodd(8) in roff on stdout from the CLI's own help: the root
# command's, then each subcommand's (and their subcommands'), so the man page
# says exactly what `staticpodd CMD --help` says.
# Usage: packaging/manpage.sh BINARY VERSION
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BINARY VERSION" >&2; exit 2; }
bin=$1 version=$2

# roff-escape: backslashes, and lines starting with . or ' are not requests.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# subcommands prints the names listed under "Available Commands:" in help text.
subcommands() {
	awk '/^Available Commands:/{on=1; next} on && /^$/{on=0} on {print $1}' |
		grep -v -x -e help -e completion || true
}

cat <<HEAD
.TH STATICPODD 8 "" "staticpodd $version" "System Administration"
.SH NAME
staticpodd \- run Kubernetes static pods without a kubelet
.SH SYNOPSIS
.B staticpodd
.I command
.RI [ flags ]
.SH DESCRIPTION
HEAD
"$bin" --help | esc | sed -e '1i .nf' -e '$a .fi'

walk() {
	for sub in $("$bin" "$@" --help | subcommands); do
		echo ".SH \"$(echo "$* $sub" | sed 's/^ //' | tr a-z A-Z)\""
		"$bin" "$@" "$sub" --help | esc | sed -e '1i .nf' -e '$a .fi'
		walk "$@" "$sub"
	done
}
walk

cat <<'TAIL'
.SH FILES
.TP
.I /etc/staticpodd/config.yaml
the daemon's KubeletConfiguration
.TP
.I /etc/default/staticpodd
extra flags for the unit (STATICPODD_ARGS, STATICPODD_EXTRA_ARGS)
.TP
.I /etc/kubernetes/manifests
static pod manifests
.TP
.I /var/lib/staticpodd/images/import
image tarballs dropped here are imported
.TP
.I /run/staticpodd/staticpodd.sock
the CLI's socket
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1),
.BR systemd.service (5)
TAIL
