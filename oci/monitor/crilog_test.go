package monitor

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

func TestCRILog(t *testing.T) {
	long := strings.Repeat("x", MaxLogLine+10)
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lines", "a\nb\n", []string{"stdout F a", "stdout F b"}},
		{"empty line", "\n", []string{"stdout F "}},
		{"no newline at EOF", "a\nrest", []string{"stdout F a", "stdout P rest"}},
		{"long line", long + "\n", []string{"stdout P " + long[:MaxLogLine], "stdout F " + long[MaxLogLine:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c", "0.log")
			l, err := openCRILog(path, LogRotation{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
			l.now = func() time.Time { return at }
			if err := l.copy("stdout", strings.NewReader(tc.in)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want string
			for _, w := range tc.want {
				want += "2026-01-02T03:04:05.000000006Z " + w + "\n"
			}
			if string(data) != want {
				t.Errorf("log\n%q\nwant\n%q", data, want)
			}
		})
	}
}

// recorder is a slog handler keeping the messages logged, and telling each
// on a channel.
type recorder struct {
	mu     sync.Mutex
	msgs   []string
	logged chan string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	select {
	case r.logged <- rec.Message:
	default:
	}
	return nil
}

// openFullLog is a log whose every write fails with ENOSPC: its file is
// /dev/full, put in place after the open, which opens only regular files.
func openFullLog(t *testing.T, log *slog.Logger) *criLog {
	t.Helper()
	l, err := openCRILog(filepath.Join(t.TempDir(), "0.log"), LogRotation{}, log)
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	_ = l.f.Close()
	l.f = full
	l.mu.Unlock()
	return l
}

func TestCRILogKeepsDrainingWhenWritesFail(t *testing.T) {
	rec := &recorder{logged: make(chan string, 1)}
	l := openFullLog(t, slog.New(rec)) // every write: ENOSPC
	defer l.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan error, 1)
	go func() { copied <- l.copy("stdout", pr) }()

	// Far more than a pipe holds: a copy that stopped would block the writer.
	line := []byte(strings.Repeat("x", 99) + "\n")
	wrote := make(chan error, 1)
	go func() {
		var err error
		for range 4000 {
			if _, err = pw.Write(line); err != nil {
				break
			}
		}
		wrote <- errors.Join(err, pw.Close())
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("container output blocked: the log copy stopped reading after a write error")
	}
	if err := <-copied; err != nil {
		t.Errorf("copy = %v, want nil at EOF", err)
	}
	if len(rec.msgs) != 1 {
		t.Errorf("logged %q, want one warning for 4000 failed writes", rec.msgs)
	}
}

func TestCRILogResumesAfterWritesFail(t *testing.T) {
	rec := &recorder{logged: make(chan string, 1)}
	l := openFullLog(t, slog.New(rec))
	pr, pw := io.Pipe()
	copied := make(chan error, 1)
	go func() { copied <- l.copy("stdout", pr) }()
	if _, err := pw.Write([]byte("lost\n")); err != nil {
		t.Fatal(err)
	}
	<-rec.logged // the failure

	// Space again: the next line is written.
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	full := l.f
	l.f = f
	l.mu.Unlock()
	_ = full.Close()
	if _, err := pw.Write([]byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte(" stdout F kept\n")) || bytes.Contains(data, []byte("lost")) {
		t.Errorf("log %q, want only the line written after the failure", data)
	}
	if len(rec.msgs) != 2 {
		t.Errorf("logged %q, want the failure and the recovery", rec.msgs)
	}
}

// logFiles returns the names in dir, sorted.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// waitForFiles waits until dir holds exactly want, woken by inotify.
func waitForFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	giveUp := time.After(30 * time.Second) // only ever reached on failure
	for {
		got := logFiles(t, dir)
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-w.Events:
		case <-w.Errors:
		case <-giveUp:
			t.Fatalf("files %q, want %q", got, want)
		}
	}
}

// readLogFiles returns the content of a log's files, rotated (decompressed)
// then live, in order, and each file's uncompressed size.
func readLogFiles(t *testing.T, path string) ([]byte, map[string]int) {
	t.Helper()
	inUse, _, err := logfiles.RotatedLogs(path)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	sizes := map[string]int{}
	read := func(p string, gz bool) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var r io.Reader = f
		if gz {
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			r = zr
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		sizes[filepath.Base(p)] = len(data)
		all = append(all, data...)
	}
	for _, r := range inUse {
		read(r.Path, r.Compressed)
	}
	read(path, false)
	return all, sizes
}

// A whole line is in the file before the copy waits for more output, even
// when the same read brought the start of the next line.
func TestCRILogWritesLinesBeforeWaiting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	l, err := openCRILog(path, LogRotation{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan error, 1)
	go func() { copied <- l.copy("stdout", pr) }()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("first\nsec")); err != nil {
		t.Fatal(err)
	}
	giveUp := time.After(30 * time.Second) // only ever reached on failure
	for {
		data, _ := os.ReadFile(path)
		if bytes.Contains(data, []byte(" stdout F first\n")) {
			if bytes.Contains(data, []byte("sec")) {
				t.Fatalf("log %q has the unfinished line", data)
			}
			break
		}
		select {
		case <-w.Events:
		case <-w.Errors:
		case <-giveUp:
			t.Fatalf("log %q: the whole line waits for more output", data)
		}
	}
	pw.Write([]byte("ond\n"))
	pw.Close()
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(logLinesOf(t, path), "|"); got != "stdout F first|stdout F second" {
		t.Errorf("log %q", got)
	}
}

// logLinesOf returns the log's entries without their timestamps.
func logLinesOf(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		_, rest, _ := strings.Cut(line, " ")
		out = append(out, rest)
	}
	return out
}

// The live file is renamed the kubelet's way before an entry would take it
// past the size; older rotated files are gzipped, the newest is not, and
// only maxFiles files stay, the live one included. A clock that does not
// move still gives each rotated file a name of its own, in order.
func TestCRILogRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	// Each entry is 60 bytes: five fill a file.
	l, err := openCRILog(path, LogRotation{MaxSize: 300, MaxFiles: 3}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.Local)
	l.now = func() time.Time { return at }
	e := &entries{stream: "stdout"}
	for i := range 20 {
		e.add(fmt.Appendf(nil, "line %14d", i), false)
		l.write(e)
	}
	// Rotated at lines 5, 10 and 15; the first of those files went to
	// keep three.
	stamp := func(s int) string {
		return "0.log." + at.Add(time.Duration(s)*time.Second).Format("20060102-150405")
	}
	waitForFiles(t, dir, "0.log", stamp(1)+".gz", stamp(2))
	data, sizes := readLogFiles(t, path)
	var want string
	for i := 5; i < 20; i++ {
		want += fmt.Sprintf("%s stdout F line %14d\n", at.UTC().Format(time.RFC3339Nano), i)
	}
	if string(data) != want {
		t.Errorf("log files hold\n%s\nwant\n%s", data, want)
	}
	for name, n := range sizes {
		if n != 300 {
			t.Errorf("%s holds %d bytes, want 300", name, n)
		}
	}
}

// A rotation or compression cut short (the monitor killed) leaves files the
// next open tidies up the kubelet's way: temporary files and uncompressed
// copies of compressed files go, the rotated files but the newest are
// compressed.
func TestCRILogTidiesWhatACrashLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	files := map[string]string{
		"0.log":                        "live\n",
		"0.log.20260102-030401":        "one\n",
		"0.log.20260102-030402":        "two\n",
		"0.log.20260102-030402.tmp":    "half a compression",
		"0.log.20260102-030403":        "three\n",
		"0.log.20260102-030400.gz":     "",
		"0.log.20260102-030400.gz.tmp": "",
	}
	for name, content := range files {
		data := []byte(content)
		if name == "0.log.20260102-030400.gz" {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write([]byte("zero\n"))
			zw.Close()
			data = b.Bytes()
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	l, err := openCRILog(path, LogRotation{MaxSize: 1 << 20, MaxFiles: 5}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	waitForFiles(t, dir, "0.log", "0.log.20260102-030400.gz", "0.log.20260102-030401.gz",
		"0.log.20260102-030402.gz", "0.log.20260102-030403")
	if data, _ := readLogFiles(t, path); string(data) != "zero\none\ntwo\nthree\nlive\n" {
		t.Errorf("log files hold %q", data)
	}
}

// The monitor's copy under a writer faster than 50 MB/s, rotating every
// MiB: every line of both streams is in exactly one file, in order.
func TestCRILogRotationLosesNoLineUnderAFastWriter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxFiles int
	}{
		{"all files kept", 1000},
		{"five files kept", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "0.log")
			rot := LogRotation{MaxSize: 1 << 20, MaxFiles: tc.maxFiles}
			l, err := openCRILog(path, rot, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			const total = 96 << 20
			streams := map[string]int{"stdout": 3 * total / 4 / 100, "stderr": total / 4 / 100} // 100-byte lines
			start := time.Now()
			copied := make(chan error, len(streams))
			for stream, lines := range streams {
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				go func() { copied <- errors.Join(l.copy(stream, pr), pr.Close()) }()
				go func() {
					// "out 000000042 xxx...\n", 100 bytes, made cheaply:
					// the writer must outpace the copy.
					line := []byte(stream[3:] + " 000000000 " + strings.Repeat("x", 100-15) + "\n")
					buf := make([]byte, 0, 64<<10)
					for i := range lines {
						for d, n := 12, i; n > 0; d, n = d-1, n/10 {
							line[d] = byte('0' + n%10)
						}
						buf = append(buf, line...)
						if len(buf) > 60<<10 || i == lines-1 {
							if _, err := pw.Write(buf); err != nil {
								t.Error(err)
								break
							}
							buf = buf[:0]
						}
					}
					pw.Close()
				}()
			}
			for range streams {
				if err := <-copied; err != nil {
					t.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d MB in %v: %.0f MB/s", total>>20, elapsed.Round(time.Millisecond), float64(total)/(1<<20)/elapsed.Seconds())

			inUse, _, err := logfiles.RotatedLogs(path)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(inUse) + 1; n > tc.maxFiles {
				t.Errorf("%d files, want at most %d", n, tc.maxFiles)
			}
			data, sizes := readLogFiles(t, path)
			for name, n := range sizes {
				if n > 1<<20 {
					t.Errorf("%s holds %d bytes, more than the 1 MiB rotation size", name, n)
				}
			}
			next := map[string]int{}
			for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
				f := strings.SplitN(line, " ", 6)
				if len(f) != 6 || f[2] != "F" || "std"+f[3] != f[1] {
					t.Fatalf("bad entry %q", line)
				}
				n, err := strconv.Atoi(f[4])
				if err != nil {
					t.Fatalf("bad entry %q", line)
				}
				want, seen := next[f[1]]
				if !seen && tc.maxFiles < 1000 {
					want = n // the oldest files went: a later line comes first
				}
				if n != want {
					t.Fatalf("%s: line %d after line %d", f[1], n, want-1)
				}
				next[f[1]] = n + 1
			}
			for stream, lines := range streams {
				// With the oldest files gone, a stream that ended early
				// may have no line left.
				if _, seen := next[stream]; (seen || tc.maxFiles >= 1000) && next[stream] != lines {
					t.Errorf("%s: last line %d, want %d", stream, next[stream]-1, lines-1)
				}
			}
		})
	}
}

// BenchmarkCRILogCopy measures the monitor's copy of one stream into the
// log, with and without rotation by 10 MiB, for a writer writing 100-byte
// lines in chunks of 4 KiB (stdio into a pipe) or 64 KiB. cpu-ms/MB is the
// process's user + system time while it ran: the copy, the writer's
// write(2)s, and with rotation the compressor as far as it got.
func BenchmarkCRILogCopy(b *testing.B) {
	line := []byte(strings.Repeat("x", 99) + "\n")
	for _, rot := range []LogRotation{{}, {MaxSize: 10 << 20, MaxFiles: 1000}} {
		for _, chunk := range []int{4 << 10, 64 << 10} {
			name := fmt.Sprintf("rotate=%v/chunk=%dKiB", rot.MaxSize > 0, chunk>>10)
			b.Run(name, func(b *testing.B) {
				buf := bytes.Repeat(line, chunk/len(line))
				l, err := openCRILog(filepath.Join(b.TempDir(), "0.log"), rot, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				pr, pw, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				copied := make(chan error, 1)
				go func() { copied <- l.copy("stdout", pr) }()
				cpu := cpuTime()
				b.SetBytes(int64(len(buf)))
				b.ResetTimer()
				for range b.N {
					if _, err := pw.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				pw.Close()
				if err := <-copied; err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1e3/(float64(b.N*len(buf))/1e6), "cpu-ms/MB")
			})
		}
	}
}

// BenchmarkCompressRotatedLog measures gzipping a rotated 10 MiB log file,
// at the level the monitor uses and at gzip's default, the kubelet's.
func BenchmarkCompressRotatedLog(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "0.log.20260102-030405")
	var data []byte
	for i := 0; len(data) < 10<<20; i++ {
		data = fmt.Appendf(data, "2026-01-02T03:04:05.%09dZ stdout F GET /healthz 200 %d bytes in %dus from 10.0.%d.%d\n",
			i%1000000000, 100+i%900, 50+i%5000, i%256, (i/256)%256)
	}
	if err := os.WriteFile(src, data, 0o640); err != nil {
		b.Fatal(err)
	}
	for _, level := range []int{gzip.BestSpeed, gzip.DefaultCompression} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var size int64
			cpu := cpuTime()
			for range b.N {
				in, err := os.Open(src)
				if err != nil {
					b.Fatal(err)
				}
				out, err := os.Create(src + ".gz")
				if err != nil {
					b.Fatal(err)
				}
				if err := gzipLevelTo(out, in, level, nil); err != nil {
					b.Fatal(err)
				}
				fi, _ := out.Stat()
				size = fi.Size()
				in.Close()
				out.Close()
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1e3/(float64(b.N*len(data))/1e6), "cpu-ms/MB")
			b.ReportMetric(float64(size)/float64(len(data))*100, "%size")
		})
	}
}

// cpuTime is the user and system time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A reload turns rotation on for a log opened without it, and fewer files
// removes the oldest rotated ones at once.
func TestCRILogSetRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	l, err := openCRILog(path, LogRotation{MaxSize: -1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.Local)
	l.now = func() time.Time { return at }
	e := &entries{stream: "stdout"}
	line := 0
	write := func(n int) {
		for range n {
			e.add(fmt.Appendf(nil, "line %14d", line), false) // 60 bytes an entry
			l.write(e)
			line++
		}
	}
	write(10)
	waitForFiles(t, dir, "0.log")
	if err := l.setRotation(LogRotation{MaxSize: 300, MaxFiles: 4}); err != nil {
		t.Fatal(err)
	}
	write(15) // the 600 bytes there rotate at once, then at 5 and 10
	stamp := func(s int) string {
		return "0.log." + at.Add(time.Duration(s)*time.Second).Format("20060102-150405")
	}
	waitForFiles(t, dir, "0.log", stamp(0)+".gz", stamp(1)+".gz", stamp(2))
	if err := l.setRotation(LogRotation{MaxSize: 300, MaxFiles: 2}); err != nil {
		t.Fatal(err)
	}
	waitForFiles(t, dir, "0.log", stamp(2))
	data, _ := readLogFiles(t, path)
	if n := strings.Count(string(data), "\n"); n != 10 {
		t.Errorf("%d lines left, want the last 10", n)
	}
}
