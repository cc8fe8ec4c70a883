package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// fromRecords is what the command line says when it answers from a stopped
// daemon's records.
const fromRecords = "daemon not running, from records"

// With the daemon stopped and its pods left running, ps, logs, events and
// exec answer from the records (crictl with the kubelet down): the pods, the
// running container and the last exit as the daemon showed them, the logs,
// the containers' starts, and exec in the running container, its exit
// status passed on; each says it reads records.
func TestCLIWithoutDaemon(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo hello from web; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	d.WriteManifest("job.yaml", `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  containers:
  - name: work
    image: busybox
    command: ["sh", "-c", "echo job output; exit 3"]
`)
	web := d.WaitRunning("web", 30*time.Second)
	d.Eventually(30*time.Second, "the job failed", func() error {
		if p := d.Pod("job"); p == nil || p.Status.Phase != v1.PodFailed {
			return errStill
		}
		return nil
	})
	live := podsJSON(t, d, "")
	pid := containerPID(d, web, "main")
	// SIGTERM stops the daemon and leaves its pods running.
	d.Stop()
	if !procAlive(pid) {
		t.Fatalf("the container's process %d ended with the daemon", pid)
	}

	t.Run("ps", func(t *testing.T) {
		out, err := d.CLIErr("ps")
		if err != nil || !strings.Contains(out, fromRecords) {
			t.Fatalf("ps: %v\n%s", err, out)
		}
		for _, want := range [][]string{{"shop", "web-", "1/1", "Running"}, {"default", "job-", "0/1", "Error"}} {
			if !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
				f := strings.Fields(line)
				return len(f) > 3 && f[0] == want[0] && strings.HasPrefix(f[1], want[1]) && f[2] == want[2] && f[3] == want[3]
			}) {
				t.Errorf("ps does not show %q:\n%s", want, out)
			}
		}
		out, err = d.CLIErr("ps", "-o", "wide")
		if err != nil || !strings.Contains(out, fromRecords) || !strings.Contains(out, "Terminated:Error(3)") {
			t.Errorf("ps -o wide: %v\n%s", err, out)
		}
		// The records' statuses are the daemon's, as far as records go.
		offline := podsJSON(t, d, fromRecords)
		for _, name := range []string{"web", "job"} {
			a, b := findStatus(live, name), findStatus(offline, name)
			if a == nil || b == nil {
				t.Fatalf("pod %s: live %v, from records %v", name, a != nil, b != nil)
			}
			if a.Phase != b.Phase || a.PodIP != b.PodIP || !a.StartTime.Equal(b.StartTime) {
				t.Errorf("pod %s: live phase %s ip %s start %v; from records %s %s %v", name,
					a.Phase, a.PodIP, a.StartTime, b.Phase, b.PodIP, b.StartTime)
			}
			cl, co := a.ContainerStatuses[0], b.ContainerStatuses[0]
			if cl.ContainerID != co.ContainerID || cl.RestartCount != co.RestartCount || cl.Ready != co.Ready ||
				!equalState(cl.State, co.State) {
				t.Errorf("pod %s: live container %+v\nfrom records %+v", name, cl, co)
			}
		}
		if term := findStatus(offline, "job").ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 {
			t.Errorf("the job's last exit from records: %+v", term)
		}
	})
	t.Run("logs", func(t *testing.T) {
		for pod, want := range map[string]string{"web": "hello from web\n", "job": "job output\n"} {
			out, err := d.CLIErr("logs", pod)
			note, logs, _ := strings.Cut(out, "\n")
			if err != nil || !strings.HasPrefix(note, "staticpodd: "+fromRecords) || logs != want {
				t.Errorf("logs %s: %v\n%q", pod, err, out)
			}
		}
	})
	t.Run("events", func(t *testing.T) {
		out, err := d.CLIErr("events")
		if err != nil || !strings.Contains(out, fromRecords) {
			t.Fatalf("events: %v\n%s", err, out)
		}
		for _, want := range []string{"Started", "pod/" + web.Name, "main", "Container started"} {
			if !strings.Contains(out, want) {
				t.Errorf("events do not show %q:\n%s", want, out)
			}
		}
	})
	t.Run("exec", func(t *testing.T) {
		out, err := d.CLIErr("exec", "web", "--", "sh", "-c", "echo $((6*7)); cat /proc/1/cmdline | tr '\\0' ' '")
		if err != nil || !strings.Contains(out, fromRecords) || !strings.Contains(out, "\n42\nsh -c echo hello from web") {
			t.Errorf("exec: %v\n%s", err, out)
		}
		out, err = d.CLIErr("exec", "-i", "web", "--", "sh", "-c", "exit 7")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 7 {
			t.Errorf("exec of exit 7: %v\n%s", err, out)
		}
		out, err = d.CLIErr("exec", "job", "--", "true")
		if err == nil || !strings.Contains(out, "is not running: it is terminated (Error, exit code 3)") {
			t.Errorf("exec in the exited job: %v\n%s", err, out)
		}
	})
	t.Run("exec -it", func(t *testing.T) {
		term, _, exited := startExecTTY(t, d, 90, 20)
		out := term.run(t, "tty; stty size; echo do''ne", "done")
		if !strings.Contains(out, "\r\n/dev/pts/") || !strings.Contains(out, "\r\n20 90\r\n") {
			t.Errorf("tty; stty size printed %q, want a /dev/pts terminal of 20 rows, 90 columns", out)
		}
		term.write(t, "exit 4\n")
		var exit *exec.ExitError
		if err := <-exited; !errors.As(err, &exit) || exit.ExitCode() != 4 {
			t.Errorf("exec -it ended with %v, want exit status 4 from the shell", err)
		}
	})
	// The next daemon adopts the pods as they are: the records were only read.
	d.Start()
	again := d.WaitRunning("web", 30*time.Second)
	if again.Status.ContainerStatuses[0].ContainerID != web.Status.ContainerStatuses[0].ContainerID ||
		again.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after the CLI read the records, the daemon did not adopt the container: %+v", again.Status.ContainerStatuses)
	}
}

// After `run --once`, which leaves its pods running with no daemon, and
// while the daemon will not start (a broken configuration), the command line
// reads the records: the pod runs, its logs are there, exec works.
func TestCLIAfterRunOnce(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("web.yaml", sleeper("web", ""))
	if out, log, err := once(d); err != nil || resultRow(out, "web-"+d.Name) == nil {
		t.Fatalf("run --once: %v\n%s\n%s", err, out, log)
	}
	bad := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(bad, []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncgroupDriver: bogus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testdaemon.Bin, "run", "--config", bad, "--root-dir", d.RootDir, "--run-dir", d.RunDir).CombinedOutput(); err == nil {
		t.Fatalf("the daemon started with cgroupDriver: bogus\n%s", out)
	}
	out, err := d.CLIErr("ps")
	if err != nil || !strings.Contains(out, fromRecords) || !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
		f := strings.Fields(line)
		return len(f) > 3 && f[1] == "web-"+d.Name && f[2] == "1/1" && f[3] == "Running"
	}) {
		t.Errorf("ps after run --once: %v\n%s", err, out)
	}
	out, err = d.CLIErr("exec", "web", "--", "hostname")
	if err != nil || !strings.HasSuffix(out, "\nweb-"+d.Name+"\n") {
		t.Errorf("exec after run --once: %v\n%s", err, out)
	}
}

// podsJSON is `ps -o json`, its stdout alone; its stderr must hold note.
func podsJSON(t *testing.T, d *daemon, note string) []v1.Pod {
	t.Helper()
	bin := d.Bin
	if bin == "" {
		bin = testdaemon.Bin
	}
	cmd := exec.Command(bin, "ps", "-o", "json", "--root-dir", d.RootDir, "--run-dir", d.RunDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stderr.String(), note) {
		t.Fatalf("ps -o json: %v\n%s", err, stderr.String())
	}
	var list v1.PodList
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatalf("ps -o json: %v\n%s", err, stdout.String())
	}
	return list.Items
}

func findStatus(pods []v1.Pod, name string) *v1.PodStatus {
	i := slices.IndexFunc(pods, func(p v1.Pod) bool { return strings.HasPrefix(p.Name, name+"-") })
	if i < 0 {
		return nil
	}
	return &pods[i].Status
}

func equalState(a, b v1.ContainerState) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// While a daemon starts again, every answer of the command line lists the
// pods that run: from the records until it answers on its socket, then from
// the daemon, which answers once it lists every pod it found, never with
// "No pods." before its first sync. Asked through each restart, so that one
// of the answers comes in the window, if any.
func TestCLIListsThePodsWhileTheDaemonStarts(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", debugPod)
	d.WaitRunning("web", 30*time.Second)
	for i := range 3 {
		d.Kill9()
		var daemonAnswers int
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				out, err := d.CLIErr("ps")
				if err != nil || !strings.Contains(out, "web-"+d.Name) {
					t.Errorf("restart %d: ps said (%v)\n%s\nwant the pod web listed", i, err, out)
					return
				}
				if !strings.Contains(out, fromRecords) && !strings.Contains(out, "does not answer on its socket") {
					daemonAnswers++
					return // the daemon's own answer
				}
			}
		}()
		d.Start()
		<-done
		if daemonAnswers != 1 {
			t.Errorf("restart %d: no answer came from the daemon", i)
		}
	}
}
