package tests

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// rotateLogs makes d rotate container logs at size, keeping files.
func rotateLogs(d *daemon, size string, files int) {
	d.T.Helper()
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		d.T.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "containerLogMaxSize: %s\ncontainerLogMaxFiles: %d\n", size, files); err != nil {
		d.T.Fatal(err)
	}
}

// pad makes numbered lines 100 bytes long: `seq -s` puts it after every
// number but the last, so busybox seq writes them at well over 50 MB/s.
var pad = " " + strings.Repeat("x", 90) + "\n"

// runLogFiles returns the files of a run's log, rotated (oldest first) then
// live.
func runLogFiles(t *testing.T, live string) []logfiles.RotatedLog {
	t.Helper()
	rotated, _, err := logfiles.RotatedLogs(live)
	if err != nil {
		t.Fatal(err)
	}
	return append(rotated, logfiles.RotatedLog{Path: live})
}

// readEntries returns the content of each CRI entry of a log file, and the
// file's size (uncompressed).
func readEntries(t *testing.T, f logfiles.RotatedLog) ([]string, int) {
	t.Helper()
	file, err := os.Open(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var r io.Reader = file
	if f.Compressed {
		zr, err := gzip.NewReader(file)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		fields := strings.SplitN(line, " ", 4)
		if len(fields) != 4 || fields[2] != "F" {
			t.Fatalf("%s: entry %q is not a whole line", f.Path, line)
		}
		out = append(out, fields[3])
	}
	return out, len(data)
}

// checkNumbered checks that lines are "1 ...", "2 ..." up to "n", once each.
func checkNumbered(t *testing.T, lines []string, n int) {
	t.Helper()
	want := 1
	for _, l := range lines {
		num, _, _ := strings.Cut(l, " ")
		if got, err := strconv.Atoi(num); err != nil || got != want {
			t.Fatalf("line %q where line %d was due", l, want)
		}
		want++
	}
	if want != n+1 {
		t.Fatalf("last line %d, want %d", want-1, n)
	}
}

// A container writing 40 MB of numbered lines as fast as it can, its log
// rotated every MiB by its monitor: every line is in exactly one file, in
// order; each file is at most a MiB; rotated files are named as the
// kubelet names them, and all but the newest are gzipped. logs reads them
// all, or the tail.
func TestLogRotationUnderAFastWriter(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	rotateLogs(d, "1Mi", 100)
	d.Start()
	const lines = 400000
	d.WriteManifest("flood.yaml", podWithDir("flood", t.TempDir(),
		fmt.Sprintf("trap 'exit 0' TERM; seq -s '%s' 1 %d; while true; do sleep 1 & wait $!; done", pad, lines), ""))
	pod := d.WaitRunning("flood", 60*time.Second)
	live := filepath.Join(d.LogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID), "main", "0.log")
	name := regexp.MustCompile(`^0\.log\.[0-9]{8}-[0-9]{6}(\.gz)?$`)
	var files []logfiles.RotatedLog
	d.Eventually(60*time.Second, "the last line written and the rotated files compressed", func() error {
		data, err := os.ReadFile(live)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(string(data), fmt.Sprintf(" stdout F %d\n", lines)) {
			return errors.New("last line not written yet")
		}
		files = runLogFiles(t, live)
		for _, f := range files[:max(len(files)-2, 0)] {
			if !f.Compressed {
				return fmt.Errorf("%s not compressed yet", f.Path)
			}
		}
		return nil
	})
	if len(files) < 30 {
		t.Fatalf("%d files for 40 MB rotated every MiB", len(files))
	}
	var all []string
	for _, f := range files {
		if base := filepath.Base(f.Path); base != "0.log" && !name.MatchString(base) {
			t.Errorf("rotated file %s is not named <log>.<YYYYMMDD-HHMMSS>[.gz]", base)
		}
		entries, size := readEntries(t, f)
		if size > 1<<20 {
			t.Errorf("%s holds %d bytes, more than the 1 MiB rotation size", f.Path, size)
		}
		all = append(all, entries...)
	}
	checkNumbered(t, all, lines)

	out := d.CLI("logs", "flood")
	checkNumbered(t, strings.Split(strings.TrimSuffix(out, "\n"), "\n"), lines)
	if tail := d.CLI("logs", "flood", "--tail", "2"); tail != fmt.Sprintf("%d%s%d\n", lines-1, pad, lines) {
		t.Errorf("logs --tail 2 = %q", tail)
	}
}

// logs -f goes on through its container's log rotations and restarts,
// without a line lost or repeated, and ends when the pod is removed.
func TestLogsFollowAcrossRotationAndRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	rotateLogs(d, "1Mi", 5)
	d.Start()
	dir := t.TempDir()
	// Each run says it is ready, waits for the go file, writes 3 MB (three
	// rotations) and ends; the first exits (and is restarted at once), the
	// second stays.
	const lines = 30000
	script := fmt.Sprintf(`trap 'exit 0' TERM
n=$(( $(cat /s/runs 2>/dev/null || echo 0) + 1 )); echo $n > /s/runs
echo "ready $n"
while [ ! -e /s/go ]; do sleep 0.1; done
seq -s ' run'$n'%s' 1 %d
echo "end $n"
[ $n -ge 2 ] || exit 0
while true; do sleep 1 & wait $!; done`, pad, lines)
	d.WriteManifest("chatty.yaml", podWithDir("chatty", dir, script, "terminationGracePeriodSeconds: 3"))
	d.WaitRunning("chatty", 60*time.Second)

	cmd := exec.Command(testdaemon.Bin, "logs", "chatty", "-f", "--root-dir", d.RootDir, "--run-dir", d.RunDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	got := make(chan string, 1024)
	go func() {
		defer close(got)
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			got <- strings.TrimSuffix(line, "\n")
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case line, ok := <-got:
			if !ok {
				t.Fatalf("logs -f ended, want %q", want)
			}
			if line != want {
				t.Fatalf("logs -f gave %q, want %q", line, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("logs -f gave nothing in 60s, want %q", want)
		}
	}
	next("ready 1") // the follower is there before the flood
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(pad, "\n")
	for run := 1; run <= 2; run++ {
		if run == 2 {
			next("ready 2")
		}
		for i := 1; i < lines; i++ {
			next(fmt.Sprintf("%d run%d%s", i, run, line))
		}
		next(strconv.Itoa(lines))
		next(fmt.Sprintf("end %d", run))
	}
	pod := d.Pod("chatty")
	logDir := filepath.Join(d.LogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID), "main")
	for _, run := range []string{"0.log", "1.log"} {
		if files := runLogFiles(t, filepath.Join(logDir, run)); len(files) < 4 {
			t.Errorf("run %s has %d files, want at least 4: three rotations", run, len(files))
		}
	}

	d.RemoveManifest("chatty.yaml")
	select {
	case line, ok := <-got:
		if ok {
			t.Fatalf("logs -f gave %q after the last line", line)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("logs -f still runs 60s after its pod was removed")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("logs -f: %v", err)
	}
}
