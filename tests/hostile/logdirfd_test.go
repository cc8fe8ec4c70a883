package hostile

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procWithArgs returns the pid of the process whose command line is args.
func procWithArgs(t *testing.T, args ...string) int {
	t.Helper()
	want := []byte(strings.Join(args, "\x00") + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Equal(b, want) {
			return pid
		}
	}
	return 0
}

// fdTargets lists what the descriptors of pid refer to, as /proc shows them.
func fdTargets(t *testing.T, pid int) []string {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, e.Name()+" -> "+target)
		}
	}
	return out
}

// The monitor keeps the container's log directory open and passes it to
// its C half, its gzip helper and its exit recorder; none of that reaches
// the container: neither its init nor a process `staticpodd exec` starts in
// it holds a descriptor of podLogsDir or beneath it (an open directory of
// the host in a container is an escape, as runc's CVE-2024-21626 was). The
// monitor itself does hold one, which shows the check can see it.
func TestHostileLogDirFdNotInContainer(t *testing.T) {
	t.Parallel()
	d := logDirDaemon(t, "1Ki", 3)
	// The log rotates (and the gzip helper runs) before init execs sleep.
	script := `i=0; while [ $i -lt 200 ]; do echo "line $i of the output, long enough to rotate the log"; i=$((i+1)); done; exec sleep 3607`
	d.WriteManifest("fds.yaml", logDirPod("fds", d.LogsDir, "Never", script, ""))
	d.WaitRunning("fds", 60*time.Second)
	var pid int
	d.Eventually(30*time.Second, "the container's sleep", func() error {
		if pid = procWithArgs(t, "sleep", "3607"); pid == 0 {
			return os.ErrNotExist
		}
		return nil
	})
	logsDir, err := filepath.EvalSymlinks(d.LogsDir)
	if err != nil {
		t.Fatal(err)
	}
	beneath := func(fds []string) (hits []string) {
		for _, f := range fds {
			if strings.Contains(f, "-> "+logsDir) {
				hits = append(hits, f)
			}
		}
		return hits
	}
	if hits := beneath(fdTargets(t, pid)); len(hits) > 0 {
		t.Errorf("the container's init holds descriptors beneath podLogsDir: %q", hits)
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	monitor, _ := strconv.Atoi(fields[1])
	if hits := beneath(fdTargets(t, monitor)); len(hits) == 0 {
		t.Errorf("the monitor (pid %d, init's parent) holds no descriptor beneath podLogsDir: the check sees nothing", monitor)
	}
	// A process exec'd into the container lists its own descriptors.
	out, err := d.CLIErr("exec", "fds", "--", "sh", "-c", "ls -l /proc/self/fd/")
	if err != nil {
		t.Fatalf("exec: %v: %s", err, out)
	}
	if strings.Contains(out, logsDir) || strings.Contains(out, "/main") {
		t.Errorf("a process exec'd into the container holds a log directory:\n%s", out)
	}
	t.Logf("init's descriptors: %q\nexec'd process's:\n%s", fdTargets(t, pid), out)
}
