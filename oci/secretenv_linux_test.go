//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// TestSensitiveEnvInMemoryOnly: a variable whose value came from a Secret
// reaches the container's process, and a process exec'd in the container
// (through the daemon, a daemon started since, and the command line without
// one), yet no file under the run dir, the root dir or the log dir holds
// the value; the spec names the variable, in its place, without it.
func TestSensitiveEnvInMemoryOnly(t *testing.T) {
	canary := "canary-" + randHex(16)
	x := runningContainer(t, func(c *podspec.Container) {
		c.Env = []podspec.EnvVar{
			{Name: "PLAIN", Value: "plain"},
			{Name: "SECRET", Value: canary, Sensitive: true},
			{Name: "AFTER", Value: "after"},
		}
	})

	// The container's own process has it, in its place.
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(x.st.Pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00")
	if i := slices.Index(got, "SECRET="+canary); i < 0 || i == 0 || got[i-1] != "PLAIN=plain" || got[i+1] != "AFTER=after" {
		t.Errorf("container environment %q, want SECRET=<canary> between PLAIN and AFTER", got)
	}

	// The spec on disk names it, without its value.
	var s specs.Spec
	if err := readJSON(filepath.Join(x.rt.containerDir(x.st.ID), specFile), &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Process.Env, "SECRET") {
		t.Errorf("spec env %q: want the bare name SECRET", s.Process.Env)
	}

	execSees := func(name string, run func(es podspec.ExecSpec) (int, error)) {
		t.Helper()
		var out bytes.Buffer
		code, err := run(podspec.ExecSpec{Cmd: []string{"sh", "-c", `echo "$PLAIN/$SECRET/$AFTER"`}, Stdout: &out})
		if err != nil || code != 0 || out.String() != "plain/"+canary+"/after\n" {
			t.Errorf("%s: exit %d, %v, stdout %q; want plain/<canary>/after", name, code, err, out.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	execSees("Exec", func(es podspec.ExecSpec) (int, error) { return x.rt.Exec(ctx, x.st.ID, es) })
	execSees("ExecRecorded", func(es podspec.ExecSpec) (int, error) {
		return ExecRecorded(ctx, x.cfg.RunDir, x.st.ID, es, x.rt.log)
	})
	// A daemon started since holds no value of its own: the monitor does.
	if err := x.rt.Close(); err != nil {
		t.Fatal(err)
	}
	x.rt = x.newRuntime()
	execSees("Exec of the next daemon", func(es podspec.ExecSpec) (int, error) { return x.rt.Exec(ctx, x.st.ID, es) })

	for _, dir := range []string{x.cfg.RunDir, x.cfg.RootDir, x.logs} {
		for _, hit := range filesHolding(t, dir, canary) {
			t.Errorf("%s holds the secret value", hit)
		}
	}
}

// TestSensitiveEnvNULRefused: a Secret's value with a NUL byte cannot be
// an environment entry; the start fails as a configuration error that names
// the variable and shows no value.
func TestSensitiveEnvNULRefused(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	e.sandbox(pod)
	t.Cleanup(func() { _ = e.rt.RemoveSandbox(context.Background(), pod.UID) })
	c := e.container(pod, "main", "true")
	c.Env = []podspec.EnvVar{{Name: "SECRET", Value: "canary\x00rest", Sensitive: true}}
	_, err := e.rt.StartContainer(context.Background(), pod, c)
	if err == nil || !strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "canary") {
		t.Errorf("start: %v; want an error naming SECRET without its value", err)
	}
	if !errors.Is(err, podspec.ErrContainerConfig) {
		t.Errorf("start: %v; want ErrContainerConfig", err)
	}
}

// filesHolding lists the regular files under dir that contain s (the mounts
// under it are not entered: a pod's /dev/shm, its namespaces).
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	dev := func(p string) (uint64, bool) {
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		return st.Dev, err == nil
	}
	root, ok := dev(dir)
	if !ok {
		return nil
	}
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or not ours to read
		}
		if at, ok := dev(p); !ok || at != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestMonitorEnvWithoutCredentials: the directory of the daemon's systemd
// credentials is not passed on to its monitors.
func TestMonitorEnvWithoutCredentials(t *testing.T) {
	got := monitorEnv([]string{"PATH=/bin", "CREDENTIALS_DIRECTORY=/run/credentials/staticpodd.service", "NOTIFY_SOCKET=/run/n"})
	if !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Errorf("monitorEnv = %q, want PATH only", got)
	}
}
