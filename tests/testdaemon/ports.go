package testdaemon

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FreePort is a TCP port on 127.0.0.1 reserved for the test until it ends
// (see FreePorts).
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts reserves n distinct TCP ports on 127.0.0.1 for the test until it
// ends, for a process the test starts later to listen on (a daemon, etcd),
// maybe more than once (a restart).
//
// A port that was free a moment ago (listen on :0, close, hand out) is free
// for anyone until that process binds it: the kernel gives it to the next
// listen on :0 or outgoing connection of any process, another test's server
// or daemon among them. So the ports come from below the kernel's ephemeral
// range, which it never hands out by itself, and each is reserved against
// every other test process by a lock on its byte of one shared file, held
// until the test ends; the port must also bind now.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	lo, hi := reservableRange(t)
	f := portLockFile(t)
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free ports in %d-%d after %d tries", n, lo, hi, tries)
		}
		p := lo + rand.IntN(hi-lo+1)
		lock := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
		// An open file description's lock: each reservation is its own
		// open of the file, so that another in this process conflicts too.
		fd, err := unix.Open(f, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open %s: %v", f, err)
		}
		if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lock); err != nil {
			unix.Close(fd)
			continue // reserved by another test
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			unix.Close(fd)
			continue // in use by something that does not reserve
		}
		l.Close()
		t.Cleanup(func() { unix.Close(fd) })
		ports = append(ports, p)
	}
	return ports
}

// reservableRange is where FreePorts picks: below the kernel's ephemeral
// range (net.ipv4.ip_local_port_range) and above the ports services use (10250 and the like).
func reservableRange(t testing.TB) (lo, hi int) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("ip_local_port_range %q", b)
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	lo, hi = 20000, low-1
	if hi-lo < 1000 {
		t.Fatalf("the ephemeral ports (ip_local_port_range %s) leave fewer than 1000 ports between %d and them for tests", strings.TrimSpace(string(b)), lo)
	}
	return lo, hi
}

// portLockFile is the file whose bytes, one a port, the test processes of
// this machine lock to reserve ports.
func portLockFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(os.TempDir(), "staticpodd-test-ports.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(fmt.Errorf("port reservations: %w", err))
	}
	f.Close()
	return p
}
