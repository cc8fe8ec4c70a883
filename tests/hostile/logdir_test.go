package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The hostile pods of this file mount the daemon's podLogsDir writable
// (hostPath) and swap their own log directory, or their pod's, for a
// symlink to a host directory: docs/security.md, "Container logs". A
// monitor or a reader that follows it creates, renames, compresses or
// removes files there, or serves them.

// logDirDaemon is a daemon that rotates container logs at size, keeping
// files, and restarts crashed containers within a second.
func logDirDaemon(t *testing.T, size string, files int) *testdaemon.Daemon {
	t.Helper()
	d := testdaemon.New(t)
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "containerLogMaxSize: %s\ncontainerLogMaxFiles: %d\ncrashLoopBackOff: {maxContainerRestartPeriod: 1s}\n", size, files)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	return d
}

// logDirPod is a pod whose container "main" runs script with podLogsDir
// at /logs. In script, $c is its own log directory and $p its pod's.
func logDirPod(name, logsDir, restart, script, extra string) string {
	prelude := fmt.Sprintf(`for x in /logs/default_%s-*; do case $x in *.*) ;; *) p=$x ;; esac; done; c=$p/main; `, name)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: logs, hostPath: {path: %s}}
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", %q]
    volumeMounts:
    - {name: logs, mountPath: /logs}
%s`, name, restart, logsDir, prelude+script, extra)
}

// outside is what a log directory swapped for a symlink could reach: the
// symlink's target, with files named as a run's log and its rotated files
// (the oldest, which rotation removes first), and the directory podLogsDir
// is in.
type outside struct {
	dir, parent   string
	before, names string
}

func plantOutside(t *testing.T, d *testdaemon.Daemon, sub string, files ...string) *outside {
	t.Helper()
	o := &outside{dir: filepath.Join(t.TempDir(), "canary"), parent: filepath.Dir(d.LogsDir)}
	for _, f := range files {
		write(t, filepath.Join(o.dir, sub, f), "2020-01-01T00:00:00Z stdout F a host file, "+f+"\n", 0o644)
	}
	o.before, o.names = tree(t, o.dir), o.parentNames(t)
	return o
}

// parentNames lists the entries of podLogsDir's parent.
func (o *outside) parentNames(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir(o.parent)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, "\n")
}

func (o *outside) changed(t *testing.T) bool {
	return tree(t, o.dir) != o.before || o.parentNames(t) != o.names
}

func (o *outside) check(t *testing.T) {
	t.Helper()
	if after := tree(t, o.dir); after != o.before {
		t.Errorf("the monitor worked in %s, outside podLogsDir:\n%s", o.dir, diffLines(o.before, after))
	}
	if after := o.parentNames(t); after != o.names {
		t.Errorf("entries of %s, podLogsDir's parent, changed:\n%s", o.parent, diffLines(o.names, after))
	}
}

// statusMessages is every message of the pod's container status.
func statusMessages(p *corev1.Pod) string {
	var b strings.Builder
	for _, cs := range p.Status.ContainerStatuses {
		for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
			if st.Waiting != nil {
				b.WriteString(st.Waiting.Reason + ": " + st.Waiting.Message + "\n")
			}
			if st.Terminated != nil {
				b.WriteString(st.Terminated.Reason + ": " + st.Terminated.Message + "\n")
			}
		}
	}
	return b.String()
}

// swapBeforeRestart runs a pod whose first run replaces a directory of its
// log (script does it, with the target in $T) and exits; the next run writes
// enough to rotate its log twice over. The restart must create, rename and
// remove nothing in the target, and say why the container cannot start.
func swapBeforeRestart(t *testing.T, sub, swap string) {
	d := logDirDaemon(t, "1Ki", 2)
	// What the container renamed is its own doing, not the daemon's leak.
	t.Cleanup(func() {
		old, _ := filepath.Glob(filepath.Join(d.LogsDir, "*.old"))
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	})
	o := plantOutside(t, d, sub, "1.log.20200101-000000", "1.log.20200101-000001", "0.log.20200101-000000")
	target := filepath.Join(o.dir, strings.TrimSuffix(sub, "/main"))
	script := fmt.Sprintf(`T=%s; if [ -d "$c" ] && [ ! -L "$p" ] && [ ! -L "$c" ]; then %s; exit 1; fi; `+
		`i=0; while [ $i -lt 200 ]; do echo "line $i of the run after the swap, long enough to rotate"; i=$((i+1)); done; exec sleep 3600`, target, swap)
	d.WriteManifest("swap.yaml", logDirPod("swap", d.LogsDir, "Always", script, ""))
	var msgs string
	d.Eventually(90*time.Second, "a run after the swap, or its refusal", func() error {
		p := d.Pod("swap")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount < 1 {
			return fmt.Errorf("not restarted yet")
		}
		msgs = statusMessages(p)
		if !o.changed(t) && !strings.Contains(msgs, "pod log directory") {
			return fmt.Errorf("restarted, neither written outside nor refused yet: %s", msgs)
		}
		return nil
	})
	o.check(t)
	if !strings.Contains(msgs, "symlink") {
		t.Errorf("the container's status does not say why it cannot start:\n%s", msgs)
	}
	t.Logf("status:\n%s", msgs)
}

// (a) The container's own log directory, <pod dir>/main, swapped for a
// symlink to a host directory before a restart.
func TestHostileLogDirSwappedBeforeRestart(t *testing.T) {
	t.Parallel()
	swapBeforeRestart(t, "", `mv "$c" "$c.old" && ln -s "$T" "$c"`)
}

// (c) The pod's log directory, <ns>_<pod>_<uid>, swapped likewise: the
// target holds a main/ with the files.
func TestHostileLogPodDirSwappedBeforeRestart(t *testing.T) {
	t.Parallel()
	swapBeforeRestart(t, "pod/main", `mv "$p" "$p.old" && ln -s "$T" "$p"`)
}

// (b) The container swaps its log directory for a symlink and back, again
// and again, while it writes and its log rotates at every few lines. The
// monitor works in the directory it opened: nothing lands where the symlink
// points, and the log reads whole afterwards.
func TestHostileLogDirSwappedWhileRotating(t *testing.T) {
	t.Parallel()
	d := logDirDaemon(t, "1Ki", 2)
	o := plantOutside(t, d, "", "0.log", "0.log.20200101-000000", "0.log.20200101-000001")
	script := fmt.Sprintf(`T=%s; (i=0; while [ $i -lt 100000 ]; do echo "line $i of the output"; i=$((i+1)); done) & w=$!; n=0; `+
		`while kill -0 $w 2>/dev/null; do mv "$c" "$c.real"; ln -s "$T" "$c"; rm "$c"; mv "$c.real" "$c"; n=$((n+1)); done; wait $w; echo "swapped $n times"`, o.dir)
	d.WriteManifest("race.yaml", logDirPod("race", d.LogsDir, "Never", script, ""))
	waitState(t, d, "race", 120*time.Second, "exited", terminated)
	t.Logf("podLogsDir:\n%s", tree(t, d.LogsDir))
	o.check(t)
	out, err := d.CLIErr("logs", "race")
	if err != nil || !strings.Contains(out, "line 99999 of the output") || !strings.Contains(out, "swapped ") {
		t.Errorf("logs after the swaps (%v) do not end with the container's last lines:\n%.2000s", err, out[max(len(out)-2000, 0):])
	}
}

// A reader never serves a host file through a swapped directory: the
// container swaps its log directory for a symlink to a host directory
// holding <n>.log files with a secret, and fails. Neither `staticpodd logs`
// nor the termination message taken from the log's tail
// (FallbackToLogsOnError) shows the secret, and the exit recorder does not
// append to the host file.
func TestHostileLogDirSwappedReaders(t *testing.T) {
	t.Parallel()
	d := logDirDaemon(t, "10Mi", 5)
	marker := "SECRET" + testdaemon.RandHex(8)
	o := &outside{dir: filepath.Join(t.TempDir(), "canary"), parent: filepath.Dir(d.LogsDir)}
	for _, f := range []string{"0.log", "1.log", "7.log"} {
		write(t, filepath.Join(o.dir, f), "2020-01-01T00:00:00Z stdout F "+marker+"\n", 0o644)
	}
	o.before, o.names = tree(t, o.dir), o.parentNames(t)
	script := fmt.Sprintf(`echo before the swap; mv "$c" "$c.old" && ln -s %s "$c"; echo after the swap; exit 3`, o.dir)
	d.WriteManifest("reader.yaml", logDirPod("reader", d.LogsDir, "Never", script, "    terminationMessagePolicy: FallbackToLogsOnError\n"))
	st := waitState(t, d, "reader", 60*time.Second, "exited", terminated)
	if strings.Contains(st.Terminated.Message, marker) {
		t.Errorf("the termination message is a host file's content: %q", st.Terminated.Message)
	}
	for _, args := range [][]string{{"logs", "reader"}, {"logs", "reader", "--previous"}, {"logs", "reader", "-c", "main"}} {
		out, err := d.CLIErr(args...)
		t.Logf("%v: %v\n%s", args, err, out)
		if strings.Contains(out, marker) {
			t.Errorf("%v served a host file through the swapped directory:\n%s", args, out)
		}
	}
	o.check(t)
}
