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

// inNetnsWithVeths runs fn on a thread of its own in a new network
// namespace holding the veth pairs names gives, and returns the size of
// that namespace's net/dev table with what fn returned.
func inNetnsWithVeths(pairs int, names func(i int) (string, string), fn func() error) (table int, err error) {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, left in the new namespace, ends with
		// the goroutine.
		runtime.LockOSThread()
		done <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return err
			}
			h, err := netlink.NewHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			for i := range pairs {
				name, peer := names(i)
				if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
					return err
				}
			}
			b, err := os.ReadFile("/proc/thread-self/net/dev")
			if err != nil {
				return err
			}
			table = len(b)
			return fn()
		}()
	}()
	return table, <-done
}

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
	var got int
	var allocs float64
	table, err := inNetnsWithVeths(veths/2, func(i int) (string, string) {
		return fmt.Sprintf("veth%08x", 2*i), fmt.Sprintf("veth%08x", 2*i+1)
	}, func() error {
		ifs, err := ThreadNetDev()
		got = len(ifs)
		allocs = testing.AllocsPerRun(20, func() { _, _ = ThreadNetDev() })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// As TestThreadNetDevAllocs: os.Open's file and its name, the slice of
	// interfaces as it grows, a name each.
	if max := float64(4 + 2*got + 1); allocs > max {
		t.Errorf("%v allocations per read of a %d-byte table with %d interfaces kept, want at most %v", allocs, table, got, max)
	}
}

// TestThreadNetDevHugeTable: a pod with CAP_NET_ADMIN fills its namespace
// with 600 interfaces (a table past netDevMax); a read of it is no error and
// gives maxInterfaces of them, from the table's start.
func TestThreadNetDevHugeTable(t *testing.T) {
	testroot.Require(t)
	var got []string
	table, err := inNetnsWithVeths(300, func(i int) (string, string) {
		return fmt.Sprintf("p%012xa", i), fmt.Sprintf("p%012xb", i)
	}, func() error {
		ifs, err := ThreadNetDev()
		for _, i := range ifs {
			got = append(got, i.Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if table <= netDevMax {
		t.Fatalf("the table is %d bytes, not past netDevMax", table)
	}
	if len(got) != maxInterfaces {
		t.Errorf("%d interfaces of a %d-byte table, want %d: %v", len(got), table, maxInterfaces, got)
	}
	for _, n := range got {
		if len(n) != 14 || n[0] != 'p' {
			t.Errorf("interface %q: not one of the namespace's", n)
		}
	}
}
