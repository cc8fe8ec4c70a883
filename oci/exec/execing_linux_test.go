//go:build linux && cgo

package exec

import "testing"

// A container's init is still execing while it is runc's init, a zombie
// leader in the middle of its execve included (as read from /proc while a
// hook's exec met it); the container's own program, zombie or not, is not.
func TestStatExecing(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		start      uint64
		execing    bool
	}{
		{"init execing", "5365 (runc:[2:INIT]) Z 5297 5365 5365 0 -1 4228428 1716 0 0 0 0 1 0 0 20 0 6 0 1899772 0 0 18446744073709551615 0 0 0 0 0 0 0 0 2143420159 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0", 1899772, true},
		{"init execing, its other threads gone", "5365 (runc:[2:INIT]) Z 5297 5365 5365 0 -1 4228428 1716 0 0 0 0 1 0 0 20 0 1 0 1899772 0 0", 1899772, true},
		{"init before its exec", "5365 (runc:[2:INIT]) R 5297 5365 5365 0 -1 4228428 1716 0 0 0 0 1 0 0 20 0 1 0 1899772 0 0", 1899772, true},
		{"running", "5365 (sleep) S 5297 5365 5365 0 -1 4228428 1716 0 0 0 0 1 0 0 20 0 1 0 1899772 0 0", 0, false},
		{"another zombie with threads", "77 (a) b)) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 4 0 42 0 0", 0, false},
		{"truncated", "5365 (runc:[2:INIT]) Z 5297", 0, false},
	} {
		start, execing := statExecing(tc.stat)
		if execing != tc.execing || (tc.execing && start != tc.start) {
			t.Errorf("%s: statExecing = %d, %v; want %d, %v", tc.name, start, execing, tc.start, tc.execing)
		}
	}
}
