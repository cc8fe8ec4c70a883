//go:build linux && cgo

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Any says whether List would list a sandbox: a directory with its record,
// wherever it is among many without one (partial sandboxes), and none once
// the last record is gone.
func TestAnyAgreesWithList(t *testing.T) {
	run := t.TempDir()
	m := New(Config{RunDir: run})
	dir := filepath.Join(run, Dir)
	for i := range 100 {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("partial%03d", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want bool) {
		t.Helper()
		got, err := m.Any(t.Context())
		uids, lerr := m.List(t.Context())
		if err != nil || lerr != nil || got != want || got != (len(uids) > 0) {
			t.Fatalf("Any = %v, %v; List = %q, %v; want %v", got, err, uids, lerr, want)
		}
	}
	check(false)
	whole := filepath.Join(dir, "whole")
	if err := os.MkdirAll(whole, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(whole, recordFile), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	check(true)
	if uids, _ := m.List(t.Context()); !slices.Equal(uids, []string{"whole"}) {
		t.Fatalf("List = %q", uids)
	}
	if err := os.Remove(filepath.Join(whole, recordFile)); err != nil {
		t.Fatal(err)
	}
	check(false)
}
