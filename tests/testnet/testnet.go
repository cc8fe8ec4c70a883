// Package testnet gives each test that runs pods a pod network of its own:
// a bridge and a /24 no other test on this machine holds at the same time,
// whatever process it runs in (test packages run in parallel), so that two
// daemons never share a bridge with two IPAM stores for one range.
package testnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// lockDir holds one lock file per range; a test holds its file's flock for
// as long as it runs.
const lockDir = "/run/staticpodd-testnet"

// Net is a test's pod network.
type Net struct {
	Bridge string
	Subnet netip.Prefix
}

// Alloc reserves a network until t ends, then deletes its bridge (which the
// bridge plugin makes and never removes).
func Alloc(t testing.TB) Net {
	t.Helper()
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := range 256 {
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprint(k)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			t.Fatal(err)
		}
		n := Net{Bridge: fmt.Sprintf("spdt%d", k), Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 97, byte(k), 0}), 24)}
		// A test killed before its cleanup left its bridge: start clean.
		_ = exec.Command("ip", "link", "del", n.Bridge).Run()
		t.Cleanup(func() {
			_ = exec.Command("ip", "link", "del", n.Bridge).Run()
			f.Close() // releases the lock
		})
		return n
	}
	t.Fatal("testnet: all 256 test networks are taken")
	return Net{}
}
