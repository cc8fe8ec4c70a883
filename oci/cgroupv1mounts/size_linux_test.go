package cgroupv1mounts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// longChildEnv makes the test binary a child, in a mount namespace of its
// own, that binds a cgroup hierarchy at the long paths under the directory
// it names, then starts a process as the daemon starts a monitor (with Env
// set to Encoded) and says whether it started.
const longChildEnv = "CGROUPV1MOUNTS_TEST_LONG_CHILD"

type longResult struct {
	Encoded int
	Err     string
}

func longChild(dir string) {
	var r longResult
	defer func() {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}()
	fail := func(err error) { r.Err = "setup: " + err.Error() }
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail(err)
		return
	}
	host, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil || len(host) == 0 {
		fail(fmt.Errorf("no cgroup mount to bind: %v", err))
		return
	}
	// Paths near PATH_MAX, in components under NAME_MAX; still far fewer
	// mounts than maxMounts.
	for i := 0; len(host)+i < maxMounts/2+len(host); i++ {
		p := dir
		for len(p) < 3800 {
			p = filepath.Join(p, fmt.Sprintf("%02d", i)+strings.Repeat("x", 200))
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			fail(err)
			return
		}
		if err := unix.Mount(host[0].Mountpoint, p, "", unix.MS_BIND, ""); err != nil {
			fail(err)
			return
		}
	}
	enc := Encoded()
	r.Encoded = len(enc)
	// The daemon's environment, less what made this process the child.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, longChildEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, Env+"="+enc)
	if err := cmd.Run(); err != nil {
		r.Err = err.Error()
	}
}

// TestMonitorsStartWhenTheCgroupMountsAreLong: the daemon still starts its
// monitors on a host whose cgroup mounts, listed in full, would not fit in
// one environment variable (execve takes at most 128 KiB a string): a
// hierarchy bound at long paths (as a privileged pod with bidirectional
// mount propagation may do on the host) must not stop every container.
func TestMonitorsStartWhenTheCgroupMountsAreLong(t *testing.T) {
	testroot.Require(t)
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("cgroup v2 host: no cgroup v1 mounts are passed")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), longChildEnv+"="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v: %s", err, errOut.String())
	}
	var r longResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("child's answer %q: %v", out.String(), err)
	}
	if strings.HasPrefix(r.Err, "setup: ") {
		t.Fatal(r.Err)
	}
	if r.Err != "" {
		t.Errorf("with the host's cgroup mounts in %d bytes, a monitor could not start: %s", r.Encoded, r.Err)
	}
}
