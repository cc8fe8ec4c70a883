package chaos

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The log check reads a run back across its rotated files, gzipped or not,
// and finds a line lost or repeated at a file's edge or in its middle.
func TestReadNumbered(t *testing.T) {
	entry := func(n string) string { return "2026-12-01T00:00:00.000000000Z stdout F " + n + " xxx\n" }
	write := func(path string, lines []string, gz bool) {
		t.Helper()
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(entry(l))
		}
		if !gz {
			f.WriteString(b.String())
			return
		}
		zw := gzip.NewWriter(f)
		zw.Write([]byte(b.String()))
		zw.Close()
	}
	for _, tc := range []struct {
		name                   string
		gzipped, rotated, live []string
		want                   int // -1: an error
	}{
		{"whole", []string{"1", "2"}, []string{"3"}, []string{"4", "5"}, 5},
		{"live only", nil, nil, []string{"1"}, 1},
		{"empty", nil, nil, nil, 0},
		{"lost at an edge", []string{"1", "2"}, []string{"4"}, []string{"5"}, -1},
		{"repeated at an edge", []string{"1", "2"}, []string{"2", "3"}, nil, -1},
		{"lost inside", []string{"1", "3"}, nil, []string{"4"}, -1},
		{"not from 1", nil, nil, []string{"2", "3"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			live := filepath.Join(dir, "0.log")
			if tc.gzipped != nil {
				write(live+".20261201-000000.gz", tc.gzipped, true)
			}
			if tc.rotated != nil {
				write(live+".20261201-000001", tc.rotated, false)
			}
			write(live, tc.live, false)
			got, err := readNumbered(live)
			if tc.want < 0 {
				if err == nil {
					t.Fatalf("no error, last line %d", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("readNumbered = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
