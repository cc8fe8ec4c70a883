//go:build linux && cgo

package oci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A container's termination message is what it wrote to its
// terminationMessagePath, as any user, the last 4 KiB of it; with
// FallbackToLogsOnError, a container that failed without one gets the end of
// its log.
func TestTerminationMessage(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	nobody := int64(65534)
	long := strings.Repeat("0123456789abcdef", 300) // 4800 bytes
	for _, tc := range []struct {
		name, script, path string
		fromLog            bool
		user               *int64
		want               string
	}{
		{"file", "echo -n bye > /dev/termination-log; exit 3", "/dev/termination-log", false, nil, "bye"},
		{"any user writes it", "id -u > /tmp/msg; exit 1", "/tmp/msg", false, &nobody, "65534\n"},
		{"the last 4 KiB", "echo -n " + long + " > /dev/termination-log", "/dev/termination-log", false, nil, long[len(long)-4096:]},
		{"no file, no log", "echo from the log; exit 2", "/dev/termination-log", false, nil, ""},
		{"from the log when it failed", "echo one; echo two; exit 2", "/dev/termination-log", true, nil, "one\ntwo\n"},
		{"the file wins over the log", "echo log; echo -n file > /dev/termination-log; exit 2", "/dev/termination-log", true, nil, "file"},
		{"not from the log when it succeeded", "echo log", "/dev/termination-log", true, nil, ""},
		{"no path, still from the log", "echo only the log; exit 1", "", true, nil, "only the log\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.container(pod, strings.ReplaceAll(tc.name, " ", "-"), tc.script)
			c.TerminationMessagePath, c.TerminationMessageFromLog = tc.path, tc.fromLog
			c.Security.RunAsUser = tc.user
			st := e.wait(e.start(pod, c).ID)
			if st.Message != tc.want {
				t.Errorf("message %q, want %q", st.Message, tc.want)
			}
			// A restarted daemon reads the same.
			list, err := e.newRuntime().List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range list {
				if l.ID == st.ID && l.Message != tc.want {
					t.Errorf("after a restart: message %q, want %q", l.Message, tc.want)
				}
			}
			e.destroy(st.ID)
		})
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// A container that can unmount its termination log and put a symlink in
// its place, to a host file or to its own, gets neither into its status: the
// daemon reads the file it made, never a path the container chose.
func TestTerminationMessageSymlinkNotFollowed(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := e.container(pod, "swap", "umount /dev/termination-log && rm -f /dev/termination-log && ln -s "+secret+
		" /dev/termination-log && echo swapped; echo container file > /tmp/x; ln -sf /tmp/x /tmp/y; exit 1")
	c.Security.Privileged = true
	c.TerminationMessagePath = "/dev/termination-log"
	st := e.wait(e.start(pod, c).ID)
	if got := logLines(t, c.LogPath); len(got) != 1 || got[0] != "stdout F swapped" {
		t.Fatalf("the container did not swap its termination log: log %q", got)
	}
	if strings.Contains(st.Message, "secret") || st.Message != "" {
		t.Errorf("message %q, want none", st.Message)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// The termination log is bound by path, so it is made only where no
// container can write: not in a directory others may write, not through a
// symlink, never over an existing file.
func TestCreateTerminationLogRefusesUnsafeDirs(t *testing.T) {
	top := t.TempDir()
	if err := os.Chmod(top, 0o700); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(top, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	ok := mk("ok", 0o700)
	p, err := createTerminationLog(ok)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("termination log %v %v, want mode 0666", fi, err)
	}
	if _, err := createTerminationLog(ok); err == nil {
		t.Error("an existing termination log was reused")
	}
	if _, err := createTerminationLog(mk("open", 0o777)); err == nil {
		t.Error("made in a directory anyone may write")
	}
	link := filepath.Join(top, "link")
	if err := os.Symlink(mk("target", 0o700), link); err != nil {
		t.Fatal(err)
	}
	if _, err := createTerminationLog(link); err == nil {
		t.Error("made through a symlink")
	}
	shared := mk("shared", 0o777)
	if err := os.Mkdir(filepath.Join(shared, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := createTerminationLog(filepath.Join(shared, "x")); err == nil {
		t.Error("made in a directory whose parent anyone may write")
	}
}
