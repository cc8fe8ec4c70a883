package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseLogOptions(t *testing.T) {
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query string
		want  logOptions
		err   string
	}{
		{"", logOptions{tail: -1}, ""},
		{"follow=true&previous=1&timestamps=true", logOptions{follow: true, previous: true, timestamps: true, tail: -1}, ""},
		{"tailLines=0", logOptions{tail: 0}, ""},
		{"tailLines=20", logOptions{tail: 20}, ""},
		{"sinceSeconds=90", logOptions{tail: -1, since: now.Add(-90 * time.Second)}, ""},
		{"sinceTime=2026-11-30T05:00:00Z", logOptions{tail: -1, since: now.Add(-time.Hour)}, ""},
		{"follow=yes", logOptions{}, `follow="yes" is not true or false`},
		{"tailLines=-1", logOptions{}, "tailLines"},
		{"tailLines=x", logOptions{}, "tailLines"},
		{"sinceSeconds=0", logOptions{}, "sinceSeconds"},
		{"sinceTime=yesterday", logOptions{}, "sinceTime"},
		{"sinceSeconds=1&sinceTime=2026-11-30T05:00:00Z", logOptions{}, "at most one"},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := parseLogOptions(q, now)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want one saying %q", tc.query, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.query, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%q: %+v, want %+v", tc.query, got, tc.want)
		}
	}
}

// entry is a CRI log line of the second s after 06:00.
func entry(s int, stream, tag, text string) string {
	at := time.Date(2026, 11, 30, 6, 0, s, 0, time.UTC)
	return at.Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + text + "\n"
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rotatedRun makes the files of a run that rotated three times: two
// gzipped files, the newest rotated one as it is, and the live one, each
// with two lines, "1" to "8", the 5th split into two partial entries; and
// what a cut-short compression leaves, which is not read.
func rotatedRun(t *testing.T) string {
	dir := t.TempDir()
	files := map[string][]byte{
		"0.log.20261130-060001.gz":  gzipped(t, entry(1, "stdout", "F", "1")+entry(2, "stderr", "F", "2")),
		"0.log.20261130-060003.gz":  gzipped(t, entry(3, "stdout", "F", "3")+entry(4, "stdout", "F", "4")),
		"0.log.20261130-060003":     []byte(entry(3, "stdout", "F", "copy of 3")),
		"0.log.20261130-060005":     []byte(entry(5, "stdout", "P", "5") + entry(5, "stdout", "F", "+") + entry(6, "stdout", "F", "6")),
		"0.log.20261130-060006.tmp": []byte("half a compression"),
		"0.log":                     []byte(entry(7, "stdout", "F", "7") + entry(8, "stderr", "F", "8")),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "0.log")
}

func getLogs(t *testing.T, a Agent, query string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	code, _, body := get(t, srv.Client(), srv.URL+"/containerLogs/default/web-node1/main?"+query)
	return code, string(body)
}

// The logs of a run come from all its files, rotated (gzipped or not) then
// live, in order; a tail counts lines back across them; since leaves out
// older lines; timestamps start each line of output.
func TestContainerLogsAcrossRotatedFiles(t *testing.T) {
	a := fakeAgent{logFile: rotatedRun(t)}
	for _, tc := range []struct{ query, want string }{
		{"", "1\n2\n3\n4\n5+\n6\n7\n8\n"},
		{"tailLines=0", ""},
		{"tailLines=1", "8\n"},
		{"tailLines=3", "6\n7\n8\n"},
		{"tailLines=4", "+\n6\n7\n8\n"}, // lines of the file, as the kubelet counts them
		{"tailLines=6", "4\n5+\n6\n7\n8\n"},
		{"tailLines=8", "2\n3\n4\n5+\n6\n7\n8\n"},
		{"tailLines=100", "1\n2\n3\n4\n5+\n6\n7\n8\n"},
		{"sinceTime=2026-11-30T06:00:04Z", "4\n5+\n6\n7\n8\n"},
		{"sinceTime=2026-11-30T06:00:04Z&tailLines=2", "7\n8\n"},
		{"timestamps=true&tailLines=4",
			"2026-11-30T06:00:05.000000000Z +\n2026-11-30T06:00:06.000000000Z 6\n" +
				"2026-11-30T06:00:07.000000000Z 7\n2026-11-30T06:00:08.000000000Z 8\n"},
		{"timestamps=true&sinceTime=2026-11-30T06:00:04Z&tailLines=6",
			"2026-11-30T06:00:04.000000000Z 4\n2026-11-30T06:00:05.000000000Z 5+\n" +
				"2026-11-30T06:00:06.000000000Z 6\n2026-11-30T06:00:07.000000000Z 7\n2026-11-30T06:00:08.000000000Z 8\n"},
	} {
		if code, got := getLogs(t, a, tc.query); code != http.StatusOK || got != tc.want {
			t.Errorf("?%s: %d %q, want %q", tc.query, code, got, tc.want)
		}
	}
	if code, body := getLogs(t, a, "tailLines=-3"); code != http.StatusBadRequest {
		t.Errorf("?tailLines=-3: %d %q, want 400", code, body)
	}
}

// A log file, live or rotated, that is a symlink (planted by a container
// with the host's log directory mounted) is never read through.
func TestContainerLogsNotReadThroughSymlinks(t *testing.T) {
	live := rotatedRun(t)
	dir := filepath.Dir(live)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(entry(9, "stdout", "F", "host secret")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "0.log.20261130-060006")); err != nil {
		t.Fatal(err)
	}
	if _, got := getLogs(t, fakeAgent{logFile: live}, ""); strings.Contains(got, "host secret") {
		t.Errorf("a symlinked rotated file was served: %q", got)
	}
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, live); err != nil {
		t.Fatal(err)
	}
	if _, got := getLogs(t, fakeAgent{logFile: live}, ""); strings.Contains(got, "host secret") {
		t.Errorf("a symlinked live log was served: %q", got)
	}
}

// A container's log directory, or its pod's, swapped for a symlink to a
// host directory (by a container that mounts podLogsDir) is not read
// through: neither the live file nor the rotated ones there are served.
func TestContainerLogsNotReadThroughSwappedDir(t *testing.T) {
	for _, which := range []string{"container", "pod"} {
		t.Run(which, func(t *testing.T) {
			host := t.TempDir()
			for _, f := range []string{"0.log", "0.log.20261130-060006", "main/0.log", "main/0.log.20261130-060006"} {
				p := filepath.Join(host, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(entry(9, "stdout", "F", "host secret")), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			pod := filepath.Join(t.TempDir(), "default_web-node1_uid")
			swapped := filepath.Join(pod, "main")
			if which == "pod" {
				swapped = pod
			} else if err := os.Mkdir(pod, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(host, swapped); err != nil {
				t.Fatal(err)
			}
			code, got := getLogs(t, fakeAgent{logFile: filepath.Join(pod, "main", "0.log")}, "")
			if strings.Contains(got, "host secret") {
				t.Errorf("a file behind a swapped %s directory was served: %d %q", which, code, got)
			}
		})
	}
}

// An unfinished last line is given when not following: it may never be
// finished.
// Lines that are not CRI are skipped, as the kubelet skips them.
func TestContainerLogsUnfinishedAndBadLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	data := entry(1, "stdout", "F", "one") + "not a CRI line\n" + entry(2, "stdout", "F", "two") +
		entry(3, "stdin", "F", "no such stream") + "2026-11-30T06:00:04Z stdout F unfini"
	if err := os.WriteFile(path, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
	if code, got := getLogs(t, fakeAgent{logFile: path}, ""); code != 200 || got != "one\ntwo\nunfini" {
		t.Errorf("logs %d %q", code, got)
	}
	// The unfinished line is not counted, and neither is the bad one, as
	// in the kubelet.
	if code, got := getLogs(t, fakeAgent{logFile: path}, "tailLines=1"); code != 200 || got != "unfini" {
		t.Errorf("logs with a tail of 1: %d %q", code, got)
	}
}

// followAgent's container writes until end is called.
type followAgent struct {
	fakeAgent
	mu      sync.Mutex
	ended   bool
	changed chan struct{}
}

func newFollowAgent(logFile string) *followAgent {
	return &followAgent{fakeAgent: fakeAgent{logFile: logFile}, changed: make(chan struct{})}
}

func (f *followAgent) LogEnded(ns, pod, ctr, path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

func (f *followAgent) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *followAgent) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	close(f.changed)
	f.changed = make(chan struct{})
}

// follow GETs the followed logs and returns their lines as they come; the
// channel is closed when the stream ends.
func follow(t *testing.T, a Agent, query string) <-chan string {
	t.Helper()
	srv := httptest.NewServer(CLI(a, logger()))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/containerLogs/default/web-node1/main?follow=true&" + query)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: status %d", resp.StatusCode)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if line != "" {
					lines <- line
				}
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	return lines
}

func expectLines(t *testing.T, lines <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended, want %q", w)
			}
			if got != w {
				t.Fatalf("got %q, want %q", got, w)
			}
		case <-time.After(patience):
			t.Fatalf("no line in %v, want %q", patience, w)
		}
	}
}

func expectEnd(t *testing.T, lines <-chan string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if ok {
			t.Fatalf("got %q, want the stream to end", got)
		}
	case <-time.After(patience):
		t.Fatalf("stream still open after %v", patience)
	}
}

func appendFile(t *testing.T, path string, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// A followed log goes on through a rotation, a rotation that finds the live
// file missing for a while, and into the next run; it ends once the agent
// says the container will write no more, with the unfinished line.
func TestFollowAcrossRotationAndRestart(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "0.log")
	appendFile(t, live, entry(1, "stdout", "F", "one"))
	a := newFollowAgent(live)
	lines := follow(t, a, "tailLines=1")
	expectLines(t, lines, "one")
	appendFile(t, live, entry(2, "stdout", "P", "tw"))
	appendFile(t, live, entry(2, "stdout", "F", "o"))
	expectLines(t, lines, "two")

	// Rotation: the line written just before is not lost, the one after
	// not read twice.
	appendFile(t, live, entry(3, "stdout", "F", "three"))
	if err := os.Rename(live, live+".20261130-060003"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, live, entry(4, "stdout", "F", "four"))
	expectLines(t, lines, "three", "four")

	// Renamed, and the new file not there yet.
	appendFile(t, live, entry(5, "stdout", "F", "five"))
	if err := os.Rename(live, live+".20261130-060004"); err != nil {
		t.Fatal(err)
	}
	expectLines(t, lines, "five")
	appendFile(t, live, entry(6, "stdout", "F", "six"))
	expectLines(t, lines, "six")

	// The next run, and its rotation before the follower saw it.
	next := filepath.Join(dir, "1.log")
	appendFile(t, next, entry(7, "stdout", "F", "seven"))
	if err := os.Rename(next, next+".20261130-060007"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, next, entry(8, "stderr", "F", "eight"))
	expectLines(t, lines, "seven", "eight")

	appendFile(t, next, entry(9, "stdout", "P", "unfinished"))
	a.end()
	expectLines(t, lines, "unfinished")
	expectEnd(t, lines)
}

// rotatingWriter writes numbered lines to a log and rotates it every few
// lines as the monitor does: rename, new file, the older rotated files
// gzipped, at most maxFiles kept.
type rotatingWriter struct {
	path     string
	maxFiles int
	rotated  []string
	stamp    time.Time
}

func (w *rotatingWriter) rotate(t *testing.T) {
	for len(w.rotated) > w.maxFiles-2 {
		os.Remove(w.rotated[0] + ".gz")
		os.Remove(w.rotated[0])
		w.rotated = w.rotated[1:]
	}
	w.stamp = w.stamp.Add(time.Second)
	name := w.path + "." + w.stamp.Format("20060102-150405")
	if err := os.Rename(w.path, name); err != nil {
		t.Error(err)
	}
	w.rotated = append(w.rotated, name)
	if len(w.rotated) > 1 {
		older := w.rotated[len(w.rotated)-2]
		data, err := os.ReadFile(older)
		if err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(older+".tmp", gzipped(t, string(data)), 0o640); err != nil {
			t.Error(err)
		}
		if err := os.Rename(older+".tmp", older+".gz"); err != nil {
			t.Error(err)
		}
		os.Remove(older)
	}
}

// Following a log that rotates every 50 lines while it is read gives each
// line once, in order.
func TestFollowWhileRotating(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "0.log")
	appendFile(t, live, entry(0, "stdout", "F", "0"))
	a := newFollowAgent(live)
	lines := follow(t, a, "")
	expectLines(t, lines, "0")
	w := &rotatingWriter{path: live, maxFiles: 1000, stamp: time.Date(2026, 11, 30, 6, 0, 0, 0, time.Local)}
	const total = 20000
	go func() {
		var batch strings.Builder
		for i := 1; i < total; i++ {
			batch.WriteString(entry(0, "stdout", "F", strconv.Itoa(i)))
			if i%10 == 0 {
				appendFile(t, live, batch.String())
				batch.Reset()
			}
			if i%50 == 0 {
				w.rotate(t)
			}
		}
		appendFile(t, live, batch.String())
		a.end()
	}()
	for i := 1; i < total; i++ {
		expectLines(t, lines, strconv.Itoa(i))
	}
	expectEnd(t, lines)
}

// Following from the previous run goes on into the current one.
func TestFollowFromPreviousRun(t *testing.T) {
	dir := t.TempDir()
	appendFile(t, filepath.Join(dir, "0.log"), entry(1, "stdout", "F", "old"))
	appendFile(t, filepath.Join(dir, "1.log"), entry(2, "stdout", "F", "new"))
	a := newFollowAgent(filepath.Join(dir, "0.log"))
	a.end()
	lines := follow(t, a, "")
	expectLines(t, lines, "old", "new")
	expectEnd(t, lines)
}

// A log file with a line far longer than the monitor ever writes (a
// container with podLogsDir mounted extended its live file, sparse: 256 MiB
// of zeros without a newline cost it nothing) is read in bounded memory:
// the line is cut, not gathered whole, so a reader cannot take the daemon's
// memory with it. Both a finished line and the unfinished last one.
func TestContainerLogsOverlongLineBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(entry(1, "stdout", "F", "one")), 0o640); err != nil {
		t.Fatal(err)
	}
	const huge = 256 << 20
	if err := os.Truncate(path, huge); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n" + entry(2, "stdout", "F", "two") + "2026-11-30T06:00:03Z stdout F unfini"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(path, 2*huge); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, got := getLogs(t, fakeAgent{logFile: path}, "")
	runtime.ReadMemStats(&after)
	if code != http.StatusOK || !strings.HasPrefix(got, "one\n") || !strings.Contains(got, "two\n") {
		t.Errorf("logs %d %.200q", code, got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("reading a log with a %d MiB line allocated %d MiB", huge>>20, alloc>>20)
	}
}

// A client that goes away stops the reading of its log, even where the
// reader writes nothing: a container with podLogsDir mounted extended its
// live log with a sparse terabyte of zeros (no line, so no output), which
// the daemon read to its end for a client long gone, in the tail's search
// and in the copy alike.
func TestContainerLogsStopWhenTheClientGoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(entry(1, "stdout", "F", "one")), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{"", "tailLines=10"} {
		started, done := make(chan struct{}), make(chan struct{})
		h := CLI(fakeAgent{logFile: path}, logger())
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			defer close(done)
			h.ServeHTTP(w, r)
		}))
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/containerLogs/default/web-node1/main?"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		<-started
		cancel()
		select {
		case <-done:
			srv.Close()
		case <-time.After(10 * time.Second):
			t.Errorf("?%s: the log of a terabyte is still read 10 s after its client went", query)
		}
	}
}
