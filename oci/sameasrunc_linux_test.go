//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// insideScript reports from inside a container what it got: its seccomp
// mode, no_new_privs and capability sets, user and groups, a sysctl,
// limits, what is masked or read-only, every mount with its options and
// propagation (peer group numbers left out), and /dev.
const insideScript = `
sed -n 's/^\(Seccomp\|NoNewPrivs\|CapInh\|CapPrm\|CapEff\|CapBnd\|CapAmb\):[[:space:]]*/\1=/p' /proc/self/status
echo "id=$(id)"
echo "sysctl=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)"
echo "nofile=$(ulimit -n)"
echo "umask=$(umask)"
if unshare -U true 2>/dev/null; then echo unshare=ok; else echo unshare=denied; fi
if touch /rro/sub/x 2>/dev/null; then echo rro.sub=rw; else echo rro.sub=ro; fi
awk '{ opt = ""; for (i = 7; $i != "-"; i++) opt = opt " " $i; gsub(/:[0-9]+/, "", opt); print "mount." $5 "=" $(i+1) " " $6 opt }' /proc/self/mountinfo
echo "dev=$(ls /dev | tr '\n' ' ')"
`

// The same settings, written by hand for Debian's runc (runc run, 1.1.x) and
// given to staticpodd, give a container the same view from inside, but for
// the differences listed in intendedDifferences (and in
// docs/kubelet-differences.md).
func TestSameAsRunc(t *testing.T) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatalf("runc not installed (apt-get install runc): %v", err)
	}
	e := newEnv(t)
	vol := t.TempDir()
	rro := t.TempDir()
	mountTmpfs(t, filepath.Join(rro, "sub"))

	// staticpodd
	pod := e.reportPod(func(p *podspec.Pod) {
		p.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "80"}
	})
	c := e.container(pod, "same", insideScript)
	c.Security = podspec.Security{
		RunAsUser: ptrTo[int64](1000), RunAsGroup: ptrTo[int64](3000), SupplementalGroups: []int64{4000},
		CapDrop: []string{"ALL"}, CapAdd: []string{"CHOWN", "NET_BIND_SERVICE"}, NoNewPrivileges: true,
		Seccomp: podspec.Seccomp{Type: podspec.SeccompRuntimeDefault},
	}
	oom := 1000
	c.OOMScoreAdj = &oom
	c.Mounts = []podspec.Mount{
		{Destination: "/vol", Type: "bind", Source: vol},
		{Destination: "/rro", Type: "bind", Source: rro, ReadOnly: true, RecursiveReadOnly: true},
	}
	ours := e.run(pod, c)

	// runc, over an overlay of the same image
	key := "runc-" + randHex(4)
	rootfs, _, err := e.store.Prepare(key, testImage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.store.Release(key); err != nil {
			t.Error(err)
		}
	})
	bundle := t.TempDir()
	data, err := os.ReadFile("testdata/runc-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Args = []string{"sh", "-c", insideScript}
	s.Root.Path = rootfs
	s.Linux.CgroupsPath = e.cfg.CgroupRoot + "/runc-same"
	for i := range s.Mounts {
		switch s.Mounts[i].Source {
		case "VOL":
			s.Mounts[i].Source = vol
		case "RRO":
			s.Mounts[i].Source = rro
		}
	}
	// Docker's default profile, as moby ships it, for these capabilities.
	profile, err := os.ReadFile(filepath.Join(moduleDir(t, "github.com/moby/profiles/seccomp"), "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Linux.Seccomp, err = seccomp.LoadProfile(string(profile), &s); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	id := "same-" + randHex(4)
	cmd := exec.CommandContext(context.Background(), runc, "--root", state, "run", "--bundle", bundle, id)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	_ = exec.Command(runc, "--root", state, "delete", "-f", id).Run()
	if runErr != nil {
		t.Fatalf("runc run: %v\n%s%s", runErr, stdout.String(), stderr.String())
	}
	theirs := map[string]string{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			theirs[k] = v
		}
	}

	t.Logf("staticpodd's container reported %v", ours)
	if len(ours) < 20 || len(theirs) < 20 {
		t.Fatalf("too little reported: staticpodd %v, runc %v", ours, theirs)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range []map[string]string{ours, theirs} {
			for k := range m {
				if !seen[k] && !yield(k) {
					return
				}
				seen[k] = true
			}
		}
	})
	for _, k := range keys {
		a, b := ours[k], theirs[k]
		if a == b {
			continue
		}
		if why, ok := intended(k, a, b); ok {
			t.Logf("intended: %s: staticpodd %q, runc %q: %s", k, a, b, why)
			continue
		}
		t.Errorf("%s: staticpodd %q, runc %q", k, a, b)
	}
	for _, must := range []struct{ k, v string }{{"Seccomp", "2"}, {"unshare", "denied"}, {"rro.sub", "ro"}, {"NoNewPrivs", "1"}} {
		if ours[must.k] != must.v {
			t.Errorf("staticpodd %s=%q, want %q", must.k, ours[must.k], must.v)
		}
	}
}

// intendedDifferences are the ways a staticpodd container differs from the
// same settings run by runc, each with why.
var intendedDifferences = []struct {
	key  *regexp.Regexp
	why  string
	same func(ours, theirs string) bool // nil: any values
}{
	{regexp.MustCompile(`^mount\./etc/(hosts|hostname|resolv\.conf)$`), "the pod's /etc/hosts, /etc/hostname and /etc/resolv.conf, bound into each of its containers as the kubelet does", nil},
}

func intended(key, ours, theirs string) (string, bool) {
	for _, d := range intendedDifferences {
		if d.key.MatchString(key) && (d.same == nil || d.same(ours, theirs)) {
			return d.why, true
		}
	}
	return "", false
}

func ptrTo[T any](v T) *T { return &v }

// moduleDir is where the build's copy of module path is.
func moduleDir(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}
