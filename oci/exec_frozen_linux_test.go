//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// frozenStartMargin is how long past its timeout an exec whose start hangs
// may take to return, on a loaded machine.
const frozenStartMargin = 5 * time.Second

// An exec into a container whose pod cgroup is frozen (the freezer of an
// ancestor: libcontainer still says Running, but the exec's init freezes
// as it joins the container's cgroup, and the exec server waits for it for
// ever) ends at its timeout; once thawed, the process it started (one that
// would run for long) is killed, and execs work again.
func TestExecStartIntoAFrozenPodEndsAtItsTimeout(t *testing.T) {
	x := runningContainer(t, nil)
	ctrCgroup := ""
	for _, line := range strings.Split(procInfo(t, x.st.Pid, "cgroup"), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "freezer") {
			ctrCgroup = f[2]
		}
	}
	if ctrCgroup == "" {
		t.Skip("no cgroup v1 freezer")
	}
	pod := filepath.Join("/sys/fs/cgroup/freezer", filepath.Dir(ctrCgroup))
	setFreezer := func(state string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(pod, "freezer.state"), []byte(state), 0); err != nil {
			t.Fatal(err)
		}
		poll(t, 10*time.Second, "pod cgroup not "+state, func() bool {
			b, err := os.ReadFile(filepath.Join(pod, "freezer.state"))
			return err == nil && strings.TrimSpace(string(b)) == state
		})
	}
	setFreezer("FROZEN")
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			setFreezer("THAWED")
		}
	})

	done := make(chan error, 1)
	begin := time.Now()
	go func() {
		_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{Cmd: []string{"sleep", "1000"}, Timeout: time.Second})
		done <- err
	}()
	select {
	case err := <-done:
		took := time.Since(begin)
		if !errors.Is(err, podspec.ErrExecTimeout) {
			t.Errorf("Exec into the frozen pod = %v, want ErrExecTimeout", err)
		}
		t.Logf("exec with a 1s timeout into the frozen pod returned after %v: %v", took.Round(time.Millisecond), err)
		if took > time.Second+frozenStartMargin {
			t.Errorf("Exec with a 1s timeout returned after %v, want at most %v", took, time.Second+frozenStartMargin)
		}
	case <-time.After(time.Minute):
		setFreezer("THAWED")
		thawed = true
		t.Fatalf("Exec with a 1s timeout into the frozen pod had not returned after a minute (returned once thawed: %v)", <-done)
	}
	setFreezer("THAWED")
	thawed = true
	procs := filepath.Join("/sys/fs/cgroup/freezer", ctrCgroup, "cgroup.procs")
	// The container's own are its init and the sleep it runs.
	poll(t, 10*time.Second, "the exec's processes still in the container once thawed", func() bool {
		b, err := os.ReadFile(procs)
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if pid != x.st.Pid && findProc(func(p, ppid int, _ []string) bool { return p == pid && ppid == x.st.Pid }) == 0 {
				return false
			}
		}
		return true
	})
	if code, _, _ := x.run(t, podspec.ExecSpec{Cmd: []string{"true"}}); code != 0 {
		t.Errorf("exec once thawed: exit %d", code)
	}
}
