package host

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestReadMemory(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       Memory
		err        string // in the error, "" for none
	}{
		{
			name: "kernel",
			body: "MemTotal:       16314628 kB\nMemFree:         1203624 kB\nMemAvailable:    9422332 kB\n" +
				"Buffers:          512108 kB\nHugePages_Total:       0\nHugepagesize:       2048 kB\n",
			want: Memory{Total: 16314628 << 10, Free: 1203624 << 10, Available: 9422332 << 10},
		},
		{name: "bare number is kB", body: "MemTotal: 2048\n", want: Memory{Total: 2 << 20}},
		{name: "no MemAvailable (before 3.14)", body: "MemTotal: 2048 kB\nMemFree: 1024 kB\n", want: Memory{Total: 2 << 20, Free: 1 << 20}},
		{name: "first line counts", body: "MemTotal: 2048 kB\nMemTotal: 4096 kB\n", want: Memory{Total: 2 << 20}},
		{name: "other keys' junk ignored", body: "Junk\nSwapTotal: lots\n: 5 kB\nMemTotal: 1 kB\n", want: Memory{Total: 1024}},
		{name: "no trailing newline", body: "MemTotal: 1 kB", want: Memory{Total: 1024}},
		{name: "no MemTotal", body: "MemFree: 1 kB\n", err: "no MemTotal"},
		{name: "empty", body: "", err: "no MemTotal"},
		{name: "MemTotal not a number", body: "MemTotal: lots kB\n", err: "bad MemTotal line"},
		{name: "MemTotal negative", body: "MemTotal: -5 kB\n", err: "bad MemTotal line"},
		{name: "MemTotal zero", body: "MemTotal: 0 kB\n", err: "bad MemTotal line"},
		{name: "MemTotal empty", body: "MemTotal:\n", err: "bad MemTotal line"},
		{name: "MemTotal other unit", body: "MemTotal: 2 MB\n", err: "bad MemTotal line"},
		{name: "MemTotal extra field", body: "MemTotal: 2 kB x\n", err: "bad MemTotal line"},
		{name: "MemTotal overflows int64 bytes", body: "MemTotal: 9007199254740992 kB\n", err: "bad MemTotal line"},
		{name: "MemFree malformed", body: "MemTotal: 1 kB\nMemFree: x kB\n", err: "bad MemFree line"},
		{name: "MemAvailable malformed", body: "MemTotal: 1 kB\nMemAvailable: 1 pages\n", err: "bad MemAvailable line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "meminfo")
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadMemory(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming %s with %q", err, path, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadMemoryMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing")
	_, err := ReadMemory(path)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want not-exist naming %s", err, path)
	}
}

// "" is the kernel's file, which on Linux has MemTotal.
func TestReadMemoryDefault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no /proc/meminfo off Linux")
	}
	m, err := ReadMemory("")
	if err != nil {
		t.Fatal(err)
	}
	if m.Total == 0 || m.Free > m.Total || m.Available > m.Total {
		t.Errorf("%s: %+v", Meminfo, m)
	}
}
