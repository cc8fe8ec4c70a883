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

// TestThreadNetDevHugeTable: a pod with CAP_NET_ADMIN fills its namespace
// with 600 interfaces (a table past netDevMax); a read of it is no error and
// gives maxInterfaces of them, from the table's start.
func TestThreadNetDevHugeTable(t *testing.T) {
	testroot.Require(t)
	type result struct {
		table int
		got   []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, as above
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
		for i := range 300 {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("p%012xa", i)},
				PeerName: fmt.Sprintf("p%012xb", i)}
			if r.err = h.LinkAdd(v); r.err != nil {
				return
			}
		}
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if r.err = err; err != nil {
			return
		}
		r.table = len(b)
		ifs, err := ThreadNetDev()
		if r.err = err; err != nil {
			return
		}
		for _, i := range ifs {
			r.got = append(r.got, i.Name)
		}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.table <= netDevMax {
		t.Fatalf("the table is %d bytes, not past netDevMax", r.table)
	}
	if len(r.got) != maxInterfaces {
		t.Errorf("%d interfaces of a %d-byte table, want %d: %v", len(r.got), r.table, maxInterfaces, r.got)
	}
	for _, n := range r.got {
		if len(n) != 14 || n[0] != 'p' {
			t.Errorf("interface %q: not one of the namespace's", n)
		}
	}
}
