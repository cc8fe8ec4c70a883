package testdaemon

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A reserved port is below the kernel's ephemeral range, distinct from the
// others, and locked against every other reservation, in this process too,
// until the test ends.
func TestFreePortsReserved(t *testing.T) {
	lo, hi := reservableRange(t)
	var ports []int
	t.Run("reserve", func(t *testing.T) {
		ports = FreePorts(t, 20)
		seen := map[int]bool{}
		for _, p := range ports {
			if p < lo || p > hi {
				t.Errorf("port %d outside %d-%d", p, lo, hi)
			}
			if seen[p] {
				t.Errorf("port %d twice in %v", p, ports)
			}
			seen[p] = true
			if !lockedByOther(t, p) {
				t.Errorf("port %d not locked while its test runs", p)
			}
		}
	})
	// The subtest has ended: its reservations are gone.
	for _, p := range ports {
		if lockedByOther(t, p) {
			t.Errorf("port %d still locked after its test ended", p)
		}
	}
}

// lockedByOther reports whether a new open file description cannot lock
// port p's byte.
func lockedByOther(t *testing.T, p int) bool {
	fd, err := unix.Open(portLockFile(t), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lock := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(p), Len: 1}
	err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lock)
	return err != nil
}

// While the manifest server is down, a connection is refused and the port
// cannot be bound by anyone else; Up serves again on it.
func TestManifestServerHoldsItsPort(t *testing.T) {
	s := NewManifestServer(t, "one")
	get := func() (string, error) {
		resp, err := http.Get(s.URL())
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(); err != nil || body != "one" {
		t.Fatalf("up: %q, %v", body, err)
	}
	for range 3 {
		s.Down()
		if _, err := get(); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("down: %v, want connection refused", err)
		}
		if l, err := net.Listen("tcp", s.addr); err == nil {
			l.Close()
			t.Fatalf("another listener bound %s while the server was down", s.addr)
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("listen on %s while down: %v, want address in use", s.addr, err)
		}
		s.Set("two")
		s.Up()
		if body, err := get(); err != nil || body != "two" {
			t.Fatalf("up again: %q, %v", body, err)
		}
	}
}

// RefusingAddr refuses connections, and nobody else can listen there.
func TestRefusingAddr(t *testing.T) {
	addr := RefusingAddr(t)
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); !errors.Is(err, syscall.EADDRINUSE) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("listen on %s: %v, want address in use", addr, err)
	}
}
