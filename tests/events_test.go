package tests

import (
	"bufio"
	"fmt"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// staticpodd events -w, found through STATICPODD_RUN_DIR, prints what
// happens to a crash-looping pod as it happens, with the kubelet's reasons;
// staticpodd events counts the repeats; the daemon's log says why the
// container restarts.
func TestEventsWatch(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	w := watchEvents(t, d)
	// waitLine waits for a line with every one of want, failing at the timeout.
	waitLine := func(want ...string) string {
		t.Helper()
		l, ok := w.line(60*time.Second, want...)
		if !ok {
			t.Fatalf("no line with %q from events -w within 60s", want)
		}
		return l
	}
	waitLine("LAST SEEN", "TYPE", "REASON", "OBJECT", "CONTAINER", "MESSAGE")

	stamps := filepath.Join(d.Dir, "stamps")
	os.MkdirAll(stamps, 0o755)
	d.WriteManifest("crash.yaml", podWithDir("crash", stamps, "echo run >> /s/runs; exit 3", ""))
	pod := "pod/crash-" + d.Name
	// busybox is :latest, so pulled under the default policy Always, as the
	// kubelet would: the registry of every test daemon has it.
	waitLine("Normal", "Pulling", pod, "main", `Pulling image "busybox"`)
	waitLine("Normal", "Pulled", pod, "main", `Successfully pulled image "busybox" in `)
	waitLine("Normal", "Created", pod, "main", "Container created")
	waitLine("Normal", "Started", pod, "main", "Container started")
	waitLine("Warning", "BackOff", pod, "main", "Back-off restarting failed container main in pod crash-"+d.Name+"_default(")

	out := d.CLI("events")
	if !strings.Contains(out, "(x2 over") || !containsAll(out, "Started", pod) {
		t.Errorf("events does not count the second start:\n%s", out)
	}
	// The daemon log says when the container restarts.
	d.WaitLine(10*time.Second, `msg="container exited" pod=default/crash-`+d.Name+" container=main", "exitCode=3", "restartCount=1", `restart="in 10s"`)
}

// A pod's status.startTime survives a daemon restart, even when the
// containers the pod started with are gone (a crash loop replaced them).
func TestStartTimeSurvivesDaemonRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	stamps := filepath.Join(d.Dir, "stamps")
	os.MkdirAll(stamps, 0o755)
	d.WriteManifest("crash.yaml", podWithDir("crash", stamps, "exit 3", ""))
	var started time.Time
	d.Eventually(60*time.Second, "two restarts", func() error {
		p := d.Pod("crash")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.StartTime == nil {
			return fmt.Errorf("no status yet")
		}
		if rc := p.Status.ContainerStatuses[0].RestartCount; rc < 2 {
			return fmt.Errorf("restartCount %d", rc)
		}
		started = p.Status.StartTime.Time
		return nil
	})
	d.Stop()
	d.Start()
	d.Eventually(30*time.Second, "the pod listed again", func() error {
		p := d.Pod("crash")
		if p == nil || p.Status.StartTime == nil {
			return fmt.Errorf("not yet")
		}
		if !p.Status.StartTime.Time.Equal(started) {
			t.Fatalf("startTime %v after the daemon's restart, want %v", p.Status.StartTime.Time, started)
		}
		return nil
	})
}

// eventsWatch is `staticpodd events -w` on a test daemon, its lines read as
// they come.
type eventsWatch struct {
	t     *testing.T
	lines chan string
}

// watchEvents runs `staticpodd events -w` on d until the test ends, when it
// is interrupted and must exit cleanly.
func watchEvents(t *testing.T, d *daemon) *eventsWatch {
	t.Helper()
	watch := exec.Command(testdaemon.Bin, "events", "-w")
	watch.Env = append(os.Environ(), "STATICPODD_RUN_DIR="+d.RunDir)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watch.Stderr = os.Stderr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	w := &eventsWatch{t: t, lines: make(chan string)}
	go func() {
		defer close(w.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			w.lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		_ = watch.Process.Signal(syscall.SIGINT)
		for range w.lines {
		}
		if err := watch.Wait(); err != nil {
			t.Errorf("events -w after SIGINT: %v, want a clean exit", err)
		}
	})
	return w
}

// line waits up to timeout for a line with every one of want; false if none
// came. The watch ending first fails the test.
func (w *eventsWatch) line(timeout time.Duration, want ...string) (string, bool) {
	w.t.Helper()
	end := time.After(timeout)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				w.t.Fatalf("events -w ended before a line with %q", want)
			}
			if containsAll(l, want...) {
				return l, true
			}
		case <-end:
			return "", false
		}
	}
}
