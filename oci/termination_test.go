package oci

import (
	"fmt"
	"strings"
	"testing"
)

func criLines(lines ...string) []byte {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("2026-01-02T03:04:05.123456789Z " + l + "\n")
	}
	return []byte(b.String())
}

func TestLogTail(t *testing.T) {
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("stdout F line %d", i))
	}
	long := strings.Repeat("x", 3000)
	for _, tc := range []struct {
		name  string
		data  []byte
		whole bool
		want  string
	}{
		{"full and partial lines", criLines("stdout F one", "stderr P par", "stderr F tial", "stdout F "), true, "one\npartial\n\n"},
		{"the last 80 lines", criLines(many...), true, func() string {
			var b strings.Builder
			for i := 20; i < 100; i++ {
				fmt.Fprintf(&b, "line %d\n", i)
			}
			return b.String()
		}()},
		{"the last 2048 bytes", criLines("stdout F first", "stdout F "+long), true, long[len(long)-2047:] + "\n"},
		{"a cut first line is dropped", []byte("stdout F cut in the middle\n" + string(criLines("stdout F kept"))), false, "kept\n"},
		{"not CRI lines are skipped", append([]byte("garbage\nmore garbage\n"), criLines("stdout F ok", "stdout X bad")...), true, "ok\n"},
		{"empty", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := logTail(tc.data, tc.whole, 80, 2048); got != tc.want {
				t.Errorf("logTail = %q\nwant %q", got, tc.want)
			}
		})
	}
}
