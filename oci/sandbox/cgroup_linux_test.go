//go:build linux && cgo

package sandbox

import "testing"

func TestParentSlice(t *testing.T) {
	for in, want := range map[string]string{
		"staticpodd-kubepods-pod1.slice": "staticpodd-kubepods.slice",
		"staticpodd-kubepods.slice":      "staticpodd.slice",
		"staticpodd.slice":               "-.slice",
	} {
		if got := parentSlice(in); got != want {
			t.Errorf("parentSlice(%q) = %q, want %q", in, got, want)
		}
	}
}
