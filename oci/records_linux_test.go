//go:build linux && cgo

package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Recorded reads a stopped daemon's containers as their records say, and
// changes nothing: a container whose monitor died without an exit is
// unknown, not killed and recorded 137 as the daemon's List would.
func TestRecordedReadsOnly(t *testing.T) {
	run := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	self, err := system.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(id, file string, v any) {
		t.Helper()
		dir := filepath.Join(run, containersDir, id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeJSON(filepath.Join(dir, file), v); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(id string, created time.Time) containerRecord {
		return containerRecord{ID: id, PodUID: "u1", PodName: "web-n", PodNS: "default", Name: id, Attempt: 2,
			Image: "busybox", LogPath: "/var/log/pods/x/" + id + "/2.log", CreatedAt: created}
	}
	write("exited", containerFile, rec("exited", at))
	write("exited", stateFile, monitorState{MonitorPid: gone.Process.Pid, Pid: 7, StartedAt: at.Add(time.Second)})
	write("exited", exitFile, exitRecord{ExitCode: 3, FinishedAt: at.Add(2 * time.Second)})
	write("running", containerFile, rec("running", at.Add(time.Minute)))
	write("running", stateFile, monitorState{MonitorPid: os.Getpid(), MonitorStart: self.StartTime, Pid: 42, StartedAt: at.Add(time.Minute)})
	write("lost", containerFile, rec("lost", at.Add(2*time.Minute)))
	write("lost", stateFile, monitorState{MonitorPid: gone.Process.Pid, MonitorStart: 1, Pid: 43})
	// Not containers: one being removed, one not recorded yet.
	write("old"+removingSuffix, containerFile, rec("old", at))
	write("new", stateFile, monitorState{})

	got, err := Recorded(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Recorded = %+v, want exited, running and lost", got)
	}
	if c := got[0]; c.ID != "exited" || c.State != podspec.StateExited || c.ExitCode != 3 || c.Reason != "Error" ||
		!c.StartedAt.Equal(at.Add(time.Second)) || c.Attempt != 2 || c.PodName != "web-n" {
		t.Errorf("exited: %+v", c)
	}
	if c := got[1]; c.ID != "running" || c.State != podspec.StateRunning || c.Pid != 42 {
		t.Errorf("running: %+v", c)
	}
	if c := got[2]; c.ID != "lost" || c.State != podspec.StateUnknown || c.Message == "" {
		t.Errorf("lost: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(run, containersDir, "lost", exitFile)); !os.IsNotExist(err) {
		t.Errorf("Recorded wrote the exit of the container whose monitor is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(run, containersDir, "old"+removingSuffix)); err != nil {
		t.Errorf("Recorded removed what a removal left: %v", err)
	}
	if got, err := Recorded(filepath.Join(run, "none")); got != nil || err != nil {
		t.Errorf("Recorded of a run dir without containers = %v, %v", got, err)
	}
}
