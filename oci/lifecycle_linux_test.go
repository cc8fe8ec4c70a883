//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Recover under a context that has ended does nothing and returns the
// context's cause; the next Recover cleans up what it left.
func TestRecoverHonoursCancelledContext(t *testing.T) {
	e := newEnv(t)
	orphan := filepath.Join(e.cfg.RunDir, containersDir, randHex(16))
	if err := os.Mkdir(orphan, 0o700); err != nil { // a start cut short before its record
		t.Fatal(err)
	}
	rt, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	stopped := errors.New("daemon stopping")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stopped)
	if err := rt.Recover(ctx); !errors.Is(err, stopped) {
		t.Fatalf("Recover under an ended context: %v, want its cause %v", err, stopped)
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("a cancelled Recover removed the orphan: %v", err)
	}
	if err := rt.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan after Recover: %v, want it removed", err)
	}
}

// Close ends the network check Start runs and waits for it, and
// for the spare monitor's start, and kills the spare; the pods' containers
// keep running. The check of an adopted default-network sandbox ends with
// its masquerade rule, behind the iptables lock the test holds: it cannot
// pass, so its message says how it ended.
func TestCloseJoinsBackground(t *testing.T) {
	e := newEnv(t)
	e.withNetwork()
	p := e.pod(false)
	e.sandbox(p)
	defer func() {
		if err := e.rt.RemoveSandbox(context.Background(), p.UID); err != nil {
			t.Error(err)
		}
	}()
	st := e.start(p, e.container(p, "c", "sleep 1000"))
	defer func() {
		if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGKILL); err != nil {
			t.Error(err)
		}
		e.wait(st.ID)
		e.destroy(st.ID)
	}()

	rt, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Held, the machine's iptables lock (package sandbox's) keeps the check
	// of the adopted sandbox waiting until its context ends.
	lock := holdIptablesLock(t)
	rt.Start(context.Background())
	spare := waitSpare(rt, 10*time.Second)
	if spare == nil {
		t.Fatal("no spare monitor")
	}
	rt.warmer.warm()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	select {
	case <-rt.checked:
	default:
		t.Error("Close returned before the network check did")
	}
	ss, err := rt.SandboxStatus(context.Background(), p.UID)
	if err != nil {
		t.Fatal(err)
	}
	// Killed plugin or canceled wait for the semaphore; not its timeout.
	if ss.Message == "" || strings.Contains(ss.Message, context.DeadlineExceeded.Error()) {
		t.Errorf("sandbox status %+v, want the check ended by Close", ss)
	}
	select {
	case <-spare.m.done:
	default:
		t.Error("spare monitor still running after Close")
	}
	rt.mu.Lock()
	left, refilling := rt.spare, rt.refilling
	rt.mu.Unlock()
	if left != nil || refilling || rt.warmer.inFlight.Load() {
		t.Errorf("after Close: spare %v, refilling %v, warm-up in flight %v", left, refilling, rt.warmer.inFlight.Load())
	}
	rt.refillSpare() // too late: nothing starts
	rt.mu.Lock()
	refilling = rt.refilling
	rt.mu.Unlock()
	if refilling {
		t.Error("a spare monitor started after Close")
	}
	list, err := e.rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range list {
		if got.ID == st.ID && got.State == st.State {
			return
		}
	}
	t.Errorf("containers after Close: %+v, want %s still %s", list, st.ID, st.State)
}

// holdIptablesLock takes the lock every staticpodd of the machine holds
// while it changes iptables rules; closing the file releases it.
func holdIptablesLock(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile("/run/staticpodd-iptables.lock", os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
