package oci

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCRILog(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lines", "a\nb\n", []string{"stdout F a", "stdout F b"}},
		{"empty line", "\n", []string{"stdout F "}},
		{"no newline at EOF", "a\nrest", []string{"stdout F a", "stdout P rest"}},
		{"long line", long + "\n", []string{"stdout P " + long[:maxLogLine], "stdout F " + long[maxLogLine:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c", "0.log")
			l, err := openCRILog(path, slog.New(slog.DiscardHandler))
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

func TestCRILogKeepsDrainingWhenWritesFail(t *testing.T) {
	rec := &recorder{logged: make(chan string, 1)}
	l, err := openCRILog("/dev/full", slog.New(rec)) // every write: ENOSPC
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
	l, err := openCRILog("/dev/full", slog.New(rec))
	if err != nil {
		t.Fatal(err)
	}
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
