//go:build linux && cgo

package stats

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// TestThreadNetDevAllocsManyPods: on a node with more pods than the
// kubelet's default 110, each with the host end of its veth pair in the
// host's namespace, the housekeeping's read of the host's table (20 KiB
// here) still allocates only the interfaces it returns, not the table
// again on every read.
func TestThreadNetDevAllocsManyPods(t *testing.T) {
	testroot.Require(t)
	if raceEnabled {
		t.Skip("sync.Pool drops a quarter of its Puts under the race detector")
	}
	const veths = 150
	type result struct {
		table  int
		got    int
		allocs float64
		err    error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, left in the new namespace, ends with
		// the goroutine.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		if r.err = unix.Unshare(unix.CLONE_NEWNET); r.err != nil {
			return
		}
		h, err := netlink.NewHandle()
		if r.err = err; err != nil {
			return
		}
		defer h.Close()
		for i := range veths / 2 {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("veth%08x", 2*i)},
				PeerName: fmt.Sprintf("veth%08x", 2*i+1)}
			if r.err = h.LinkAdd(v); r.err != nil {
				return
			}
		}
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if r.err = err; err != nil {
			return
		}
		r.table = len(b)
		got, err := ThreadNetDev()
		if r.err = err; err != nil {
			return
		}
		r.got = len(got)
		r.allocs = testing.AllocsPerRun(20, func() { _, _ = ThreadNetDev() })
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	// As TestThreadNetDevAllocs: os.Open's file and its name, the slice of
	// interfaces as it grows, a name each.
	if max := float64(4 + 2*r.got + 1); r.allocs > max {
		t.Errorf("%v allocations per read of a %d-byte table with %d interfaces kept, want at most %v", r.allocs, r.table, r.got, max)
	}
}
