package oci

import (
	"os"
	"path/filepath"
	"strings"
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
			l, err := openCRILog(path)
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
