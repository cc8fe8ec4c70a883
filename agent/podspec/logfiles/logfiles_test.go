package logfiles

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLogAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		ok   bool
	}{
		{"0.log", 0, true},
		{"12.log", 12, true},
		{"3.log.20260102-150405", 3, true},
		{"3.log.20260102-150405.gz", 3, true},
		{"3.log.20260102-150405.tmp", 3, true},
		{"3.log.", 0, false},
		{"3.logs", 0, false},
		{"03.log", 0, false},
		{"-1.log", 0, false},
		{"x.log", 0, false},
		{"notes.txt", 0, false},
		{"3", 0, false},
	} {
		n, ok := LogAttempt(tc.name)
		if n != tc.n || ok != tc.ok {
			t.Errorf("LogAttempt(%q) = %d, %v; want %d, %v", tc.name, n, ok, tc.n, tc.ok)
		}
	}
}

// The files of a log in use are told apart from what a cut-short rotation
// or compression left, as the kubelet's filterUnusedLogs does, and come
// oldest first whether compressed or not.
func TestRotatedLogs(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"0.log",
		"0.log.20260102-150409",     // newest: not compressed yet
		"0.log.20260102-150407.gz",  //
		"0.log.20260102-150407",     // compressed already: left by a cut-short compression
		"0.log.20260102-150408.tmp", // a compression cut short
		"0.log.20260102-150408",     //
		"0.log.20260102-150405.gz",  // oldest
		"1.log", "1.log.20260102-150401", "10.log.20260102-150400.gz", "notes.txt",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inUse, unused, err := RotatedLogs(filepath.Join(dir, "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := []RotatedLog{
		{filepath.Join(dir, "0.log.20260102-150405.gz"), "20260102-150405", true},
		{filepath.Join(dir, "0.log.20260102-150407.gz"), "20260102-150407", true},
		{filepath.Join(dir, "0.log.20260102-150408"), "20260102-150408", false},
		{filepath.Join(dir, "0.log.20260102-150409"), "20260102-150409", false},
	}
	if !slices.Equal(inUse, want) {
		t.Errorf("in use\n%v\nwant\n%v", inUse, want)
	}
	wantUnused := []string{filepath.Join(dir, "0.log.20260102-150407"), filepath.Join(dir, "0.log.20260102-150408.tmp")}
	if !slices.Equal(unused, wantUnused) {
		t.Errorf("unused %v, want %v", unused, wantUnused)
	}
	if _, _, err := RotatedLogs(filepath.Join(dir, "nothere", "0.log")); err == nil {
		t.Error("RotatedLogs of a missing directory: no error")
	}
}

// The runs of a container's log directory are every attempt with a file,
// its live one or only rotated ones, oldest first, each once.
func TestRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns_pod_uid", "c")
	if _, err := Runs(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Runs of a missing directory: %v, want it not to exist", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"10.log", "2.log.20260102-150401.gz", "2.log.20260102-150402", "1.log", "1.log.20260102-150400", "03.log", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := Runs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 10}; !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
}
