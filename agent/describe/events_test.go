package describe

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// TestWatchRowsAligned: events -w prints each row as it comes; every column
// starts where the header's does, however long a cell.
func TestWatchRowsAligned(t *testing.T) {
	var b bytes.Buffer
	WriteWatchRow(&b, EventHeader)
	WriteWatchRow(&b, []string{"0s", "Normal", "Started", "pod/web-node1", "web", "Container started"})
	WriteWatchRow(&b, []string{"59m (x12345 over 2d23h)", "Warning", "FailedPostStartHook",
		"pod/a-very-long-pod-name-that-goes-on-and-on-node1", "a-long-container-name", "PostStartHook failed"})
	WriteWatchRow(&b, []string{"1s", "Normal", "Pulled", "pod/ü-node1", "c", "ok"})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	starts := func(line string) (at []int) {
		r := []rune(line)
		for i := 1; i < len(r); i++ {
			if r[i] != ' ' && r[i-1] == ' ' && i >= 3 && string(r[i-3:i]) == "   " {
				at = append(at, i)
			}
		}
		return at
	}
	want := starts(lines[0])
	if len(want) != len(EventHeader)-1 {
		t.Fatalf("header %q: columns at %v", lines[0], want)
	}
	for _, l := range lines[1:] {
		if got := starts(l); !reflect.DeepEqual(got, want) {
			t.Errorf("row %q: columns at %v, header's at %v", l, got, want)
		}
	}
	if !strings.Contains(lines[2], "pod/a-very-long-pod-name-that-goes-…") {
		t.Errorf("long object not cut with …: %q", lines[2])
	}
}
