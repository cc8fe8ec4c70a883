package sysd

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"
)

// listen binds a unixgram socket, points NOTIFY_SOCKET at it and clears the watchdog
// variables, as systemd would for a service without WatchdogSec=.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return c
}

// received returns every datagram queued on c. Sending is synchronous on a unix
// datagram socket, so all messages sent so far are already queued.
func received(t *testing.T, c *net.UnixConn) []string {
	t.Helper()
	var msgs []string
	buf := make([]byte, 4096)
	for {
		if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return msgs
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, string(buf[:n]))
	}
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("notify messages:\n got %q\nwant %q", got, want)
	}
}

func TestReadyOnceWithStatus(t *testing.T) {
	c := listen(t)
	n := New(nil)
	if !n.Enabled() {
		t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
	}
	n.Status("3 pods: 2 running,\n1 waiting")
	n.Ready()
	n.Ready()
	expect(t, received(t, c),
		"STATUS=3 pods: 2 running, 1 waiting",
		"READY=1\nSTATUS=3 pods: 2 running, 1 waiting")
}

func TestReadyWithoutStatus(t *testing.T) {
	c := listen(t)
	New(nil).Ready()
	expect(t, received(t, c), "READY=1\nSTATUS=Ready")
}

func TestReloadingThenReady(t *testing.T) {
	c := listen(t)
	n := New(nil)
	n.Ready()
	before := monotonicUsec(t)
	n.Reloading()
	after := monotonicUsec(t)
	n.Status("reloaded")
	n.Ready()

	msgs := received(t, c)
	if len(msgs) != 4 {
		t.Fatalf("got %d messages %q, want 4", len(msgs), msgs)
	}
	lines := strings.Split(msgs[1], "\n")
	if len(lines) != 3 || lines[0] != "RELOADING=1" || lines[2] != "STATUS=Reloading" {
		t.Fatalf("reload message = %q, want RELOADING=1, MONOTONIC_USEC=, STATUS=", msgs[1])
	}
	usec, err := strconv.ParseInt(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	if err != nil || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
		t.Fatalf("bad MONOTONIC_USEC line %q: %v", lines[1], err)
	}
	if usec < before || usec > after {
		t.Errorf("MONOTONIC_USEC=%d, want within [%d, %d] of CLOCK_MONOTONIC", usec, before, after)
	}
	expect(t, []string{msgs[0], msgs[2], msgs[3]},
		"READY=1\nSTATUS=Ready", "STATUS=reloaded", "READY=1\nSTATUS=reloaded")
}

func monotonicUsec(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano() / 1000
}

func TestStopping(t *testing.T) {
	c := listen(t)
	New(nil).Stopping()
	expect(t, received(t, c), "STOPPING=1\nSTATUS=Stopping")
}

func TestWatchdogRateLimited(t *testing.T) {
	c := listen(t)
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		if got := n.WatchdogInterval(); got != 15*time.Second {
			t.Fatalf("WatchdogInterval() = %v, want 15s", got)
		}
		n.Watchdog() // t=0: first ping goes out
		n.Status("t=0")
		time.Sleep(10 * time.Second)
		n.Watchdog() // t=10s: too soon
		n.Status("t=10s")
		time.Sleep(5 * time.Second)
		n.Watchdog() // t=15s: one interval since the last ping
		n.Watchdog() // too soon
		n.Status("t=15s")
		time.Sleep(40 * time.Second)
		n.Watchdog() // a late ping still goes out
	})
	expect(t, received(t, c),
		"WATCHDOG=1", "STATUS=t=0", "STATUS=t=10s", "WATCHDOG=1", "STATUS=t=15s", "WATCHDOG=1")
}

func TestWatchdogInterval(t *testing.T) {
	for _, tc := range []struct {
		name, usec, pid string
		want            time.Duration
	}{
		{"no watchdog", "", "", 0},
		{"watchdog", "30000000", "", 15 * time.Second},
		{"watchdog for us", "2000000", strconv.Itoa(os.Getpid()), time.Second},
		{"watchdog for another process", "30000000", strconv.Itoa(os.Getpid() + 1), 0},
		{"garbage", "soon", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t)
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			n := New(nil)
			if got := n.WatchdogInterval(); got != tc.want {
				t.Errorf("WatchdogInterval() = %v, want %v", got, tc.want)
			}
			n.Watchdog()
			if got, sent := received(t, c), tc.want != 0; (len(got) == 1) != sent {
				t.Errorf("Watchdog() sent %q, want a ping: %v", got, sent)
			}
		})
	}
}

func TestNoSocketNoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", "")
	var logs bytes.Buffer
	n := New(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if n.Enabled() || n.WatchdogInterval() != 0 {
		t.Errorf("Enabled() = %v, WatchdogInterval() = %v; want false, 0", n.Enabled(), n.WatchdogInterval())
	}
	n.Status("x")
	n.Ready()
	n.Watchdog()
	n.Reloading()
	n.Stopping()
	if logs.Len() != 0 {
		t.Errorf("logged without NOTIFY_SOCKET: %s", logs.String())
	}
}

func TestSendErrorLoggedOnce(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "missing.sock"))
	var logs bytes.Buffer
	n := New(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	n.Status("x")
	n.Ready()
	n.Stopping()
	if got := strings.Count(logs.String(), "sd_notify failed"); got != 1 {
		t.Errorf("logged %d send failures, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Errorf("send failure not logged at debug: %s", logs.String())
	}
}
