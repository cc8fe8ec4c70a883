// Command mkimage builds a small image tarball from Debian's busybox-static binary,
// for staticpodd's tests and demo: no network, and the same bytes (so the same
// digests) on every build from the same busybox.
//
//	mkimage -o busybox.tar
//	mkimage -ref example.com/web:v1 -format oci -compress zstd -cmd 'httpd,-f,-p,8080,-h,/www' -o web.tar.zst
//
// -entrypoint and -cmd take a JSON array (["sh","-c","echo hi"]) or a comma list
// (sh,-c,echo hi). -ref, -env and -add may be repeated; -add SRC:DST copies the
// host file SRC into the image at DST:
//
//	mkimage -ref registry.k8s.io/etcd:3.7.0-0 -add bin/etcd:/usr/local/bin/etcd -o etcd.tar
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var o options
	var refs, env, add stringList
	var entrypoint, cmd string
	flag.StringVar(&o.busybox, "busybox", "/bin/busybox", "the static busybox binary to put in the image")
	flag.Var(&refs, "ref", "image reference, normalised as Docker does; repeatable (default docker.io/library/busybox:latest)")
	flag.StringVar(&o.format, "format", "docker", "archive format: docker (docker-archive) or oci (OCI archive)")
	flag.StringVar(&o.compress, "compress", "none", "compression of the whole archive: none, gzip or zstd")
	flag.StringVar(&entrypoint, "entrypoint", "", `entrypoint: JSON array or comma list (default none)`)
	flag.StringVar(&cmd, "cmd", `["sh"]`, `command: JSON array or comma list`)
	flag.Var(&env, "env", "KEY=VALUE added to the image's environment (PATH is always set); repeatable")
	flag.Var(&add, "add", "SRC:DST: the host file SRC, put into the image at the absolute path DST with SRC's mode; repeatable")
	flag.StringVar(&o.stopSignal, "stop-signal", "", `the image's StopSignal ("SIGUSR1"); default none (SIGTERM)`)
	flag.StringVar(&o.out, "o", "busybox.tar", "output file")
	flag.Int64Var(&o.pad, "pad", 0, "add a layer with /pad, this many incompressible bytes (for reclaim tests)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	o.refs = refs
	if len(o.refs) == 0 {
		o.refs = []string{"docker.io/library/busybox:latest"}
	}
	o.env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	var err error
	if o.entrypoint, err = parseList(entrypoint); err == nil {
		o.cmd, err = parseList(cmd)
	}
	if err == nil {
		o.files, err = parseAdds(add)
	}
	if err == nil {
		err = build(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	logger.Info("image written", "file", o.out, "refs", o.refs, "format", o.format, "compress", o.compress)
}
