package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The sandbox settings of a manifest and of the configuration reach the
// container, as seen from inside it: seccompDefault and a Localhost profile,
// sysctls (safe and allowedUnsafeSysctls), fsGroup on an emptyDir; and what
// may not be given is refused on its container, saying why.
func TestSandboxFromInside(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	cfg, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, "seccompDefault: true\nallowedUnsafeSysctls: [net.core.somaxconn]\n"...)
	if err := os.WriteFile(d.Config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	profiles := filepath.Join(d.RootDir, "seccomp")
	outside := filepath.Join(d.Dir, "outside.json")
	for name, data := range map[string]string{
		filepath.Join(profiles, "nomkdir.json"): `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`,
		outside:                                 `{"defaultAction":"SCMP_ACT_ALLOW"}`,
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(profiles, "escape.json")); err != nil {
		t.Fatal(err)
	}
	d.Start()

	const report = `sed -n 's/^\(Seccomp\|NoNewPrivs\|CapEff\|CapBnd\):[[:space:]]*/\1=/p' /proc/self/status
echo groups=$(id -G)
echo syncookies=$(cat /proc/sys/net/ipv4/tcp_syncookies)
echo somaxconn=$(cat /proc/sys/net/core/somaxconn)
touch /vol/f && echo volgroup=$(stat -c %g /vol/f) && echo volmode=$(stat -c %a /vol)
if mkdir /tmp/d 2>/dev/null; then echo mkdir=ok; else echo mkdir=denied; fi
if unshare -U true 2>/dev/null; then echo unshare=ok; else echo unshare=denied; fi
`
	pod := func(name, podSC, containerSC string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  securityContext: %s
  volumes: [{name: vol, emptyDir: {}}]
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", %q]
    volumeMounts: [{name: vol, mountPath: /vol}]
    securityContext: %s
`, name, podSC, report, containerSC)
	}
	d.WriteManifest("default.yaml", pod("default",
		"{runAsUser: 1000, fsGroup: 2000, supplementalGroups: [3000], sysctls: [{name: net.ipv4.tcp_syncookies, value: '0'}, {name: net.core.somaxconn, value: '1234'}]}",
		"{allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}}"))
	d.WriteManifest("localhost.yaml", pod("localhost", "{seccompProfile: {type: Localhost, localhostProfile: nomkdir.json}}", "{}"))
	d.WriteManifest("unconfined.yaml", pod("unconfined", "{}", "{seccompProfile: {type: Unconfined}}"))
	d.WriteManifest("escape.yaml", pod("escape", "{}", "{seccompProfile: {type: Localhost, localhostProfile: escape.json}}"))
	d.WriteManifest("unsafe.yaml", pod("unsafe", "{sysctls: [{name: net.ipv4.ip_forward, value: '1'}]}", "{}"))
	d.WriteManifest("host.yaml", pod("host", "{sysctls: [{name: vm.overcommit_memory, value: '1'}]}", "{}"))

	for name, want := range map[string]map[string]string{
		"default": {"Seccomp": "2", "NoNewPrivs": "1", "CapBnd": "0000000000000400", "CapEff": "0000000000000000",
			"groups":     "0 2000 3000", // gid 0: uid 1000 is not in the image's /etc/passwd
			"syncookies": "0", "somaxconn": "1234", "volgroup": "2000", "volmode": "2777", "mkdir": "ok", "unshare": "denied"},
		"localhost":  {"Seccomp": "2", "mkdir": "denied", "unshare": "ok", "CapEff": "00000000a80425fb"},
		"unconfined": {"Seccomp": "0", "mkdir": "ok", "unshare": "ok"},
	} {
		d.Eventually(30*time.Second, name+" ran", func() error {
			p := d.Pod(name)
			if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				return fmt.Errorf("not terminated yet")
			}
			return nil
		})
		got := map[string]string{}
		for _, l := range strings.Split(d.CLI("logs", name), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				got[k] = v
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("pod %s: %s=%q, want %q (all: %v)", name, k, got[k], v, got)
			}
		}
	}
	for name, msg := range map[string]string{
		"escape": "seccompProfile: localhostProfile escape.json: open escape.json in " + profiles + ": it leads out of the directory",
		"unsafe": `forbidden sysctl "net.ipv4.ip_forward": not allowlisted`,
		"host":   `forbidden sysctl "vm.overcommit_memory": not known to be namespaced`,
	} {
		d.Eventually(30*time.Second, name+" refused", func() error {
			p := d.Pod(name)
			if p == nil || len(p.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("no status")
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, msg) {
				return fmt.Errorf("state %+v, want CreateContainerConfigError saying %q", p.Status.ContainerStatuses[0].State, msg)
			}
			return nil
		})
	}
	for _, f := range []string{"default", "localhost", "unconfined", "escape", "unsafe", "host"} {
		d.RemoveManifest(f + ".yaml")
	}
	d.Eventually(30*time.Second, "every pod gone", func() error {
		if n := len(d.Pods()); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	d.AssertNoLeaks()
}
