//go:build linux && cgo

package oci

import (
	"context"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// report runs script in a container of pod with security sec and returns
// what it printed, "key=value" per line, by key.
func (e *env) report(pod *podspec.Pod, name string, sec podspec.Security, script string) map[string]string {
	e.t.Helper()
	c := e.container(pod, name, script)
	c.Security = sec
	return e.run(pod, c)
}

// run runs container c of pod to its end and returns what it printed,
// "key=value" per line, by key.
func (e *env) run(pod *podspec.Pod, c *podspec.Container) map[string]string {
	e.t.Helper()
	name := c.Name
	st := e.start(pod, c)
	st = e.wait(st.ID)
	defer e.destroy(st.ID)
	if st.ExitCode != 0 {
		e.t.Fatalf("container %s exited %d: %q", name, st.ExitCode, logLines(e.t, c.LogPath))
	}
	out := map[string]string{}
	for _, l := range logLines(e.t, c.LogPath) {
		l = strings.TrimPrefix(l, "stdout F ")
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out
}

// reportPod makes a pod's sandbox, changed by edit first, removed when
// the test ends.
func (e *env) reportPod(edit func(*podspec.Pod)) *podspec.Pod {
	e.t.Helper()
	pod := e.pod(false)
	if edit != nil {
		edit(pod)
	}
	e.sandbox(pod)
	e.t.Cleanup(func() {
		if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
			e.t.Error(err)
		}
	})
	return pod
}

// statusScript prints the seccomp mode, no_new_privs and effective
// capabilities from /proc/self/status, and whether unshare(2) (refused by
// the default profile without CAP_SYS_ADMIN, allowed by the kernel for a
// new user namespace) and mkdir(2) work.
const statusScript = `
sed -n 's/^\(Seccomp\|NoNewPrivs\|CapEff\):[[:space:]]*/\1=/p' /proc/self/status
if unshare -U true 2>/dev/null; then echo unshare=ok; else echo unshare=denied; fi
if mkdir /tmp/d 2>/dev/null; then echo mkdir=ok; else echo mkdir=denied; fi
`

func TestSeccompFromInside(t *testing.T) {
	e := newEnv(t)
	// Denies mkdir and mkdirat with EPERM, allows the rest: Docker's format.
	localhost := []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`)
	pod := e.reportPod(nil)
	for _, tc := range []struct {
		name    string
		sec     podspec.Security
		seccomp string // Seccomp: in /proc/self/status
		unshare string
		mkdir   string
	}{
		{"unconfined", podspec.Security{Seccomp: podspec.Seccomp{Type: podspec.SeccompUnconfined}}, "0", "ok", "ok"},
		{"default", podspec.Security{Seccomp: podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}}, "2", "denied", "ok"},
		{"localhost", podspec.Security{Seccomp: podspec.Seccomp{Type: podspec.SeccompLocalhost, Name: "nomkdir.json", Profile: localhost}}, "2", "ok", "denied"},
		// A privileged container runs without a filter, whatever it asks.
		{"privileged", podspec.Security{Privileged: true, Seccomp: podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}}, "0", "ok", "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.report(pod, tc.name, tc.sec, statusScript)
			if got["Seccomp"] != tc.seccomp || got["unshare"] != tc.unshare || got["mkdir"] != tc.mkdir {
				t.Errorf("Seccomp %q unshare %q mkdir %q, want %q %q %q (all: %v)",
					got["Seccomp"], got["unshare"], got["mkdir"], tc.seccomp, tc.unshare, tc.mkdir, got)
			}
		})
	}
}

func TestCapabilitiesAndNoNewPrivsFromInside(t *testing.T) {
	e := newEnv(t)
	pod := e.reportPod(nil)
	for _, tc := range []struct {
		name       string
		sec        podspec.Security
		capEff     string
		noNewPrivs string
	}{
		// Docker's default set: chown dac_override fowner fsetid kill
		// setgid setuid setpcap net_bind_service net_raw sys_chroot mknod
		// audit_write setfcap.
		{"default", podspec.Security{}, "00000000a80425fb", "0"},
		{"drop-all-add-one", podspec.Security{CapDrop: []string{"ALL"}, CapAdd: []string{"NET_BIND_SERVICE"}, NoNewPrivileges: true}, "0000000000000400", "1"},
		{"drop-all", podspec.Security{CapDrop: []string{"ALL"}}, "0000000000000000", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.report(pod, tc.name, tc.sec, statusScript)
			if got["CapEff"] != tc.capEff || got["NoNewPrivs"] != tc.noNewPrivs {
				t.Errorf("CapEff %q NoNewPrivs %q, want %q %q", got["CapEff"], got["NoNewPrivs"], tc.capEff, tc.noNewPrivs)
			}
		})
	}
}

func TestSysctlsFromInside(t *testing.T) {
	e := newEnv(t)
	pod := e.reportPod(func(pod *podspec.Pod) {
		pod.Sysctls = map[string]string{
			"net.ipv4.ip_unprivileged_port_start": "80",
			"kernel.shm_rmid_forced":              "1",
		}
	})
	got := e.report(pod, "sysctl", podspec.Security{}, `
echo port=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)
echo shm=$(cat /proc/sys/kernel/shm_rmid_forced)
`)
	if got["port"] != "80" || got["shm"] != "1" {
		t.Errorf("in the pod: ip_unprivileged_port_start %q shm_rmid_forced %q, want 80 and 1", got["port"], got["shm"])
	}
}
