//go:build linux && cgo

package oci

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// deadPidfds counts this process's open pidfds of processes that are gone.
func deadPidfds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); l != "anon_inode:[pidfd]" {
			continue
		}
		info, _ := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if strings.Contains(string(info), "\nPid:\t-1\n") {
			n++
		}
	}
	return n
}

// Signalling a container leaves no descriptor behind. libcontainer's own
// Signal left a pidfd for each signal until a garbage collection closed it;
// the collector is off here, so any such leak shows.
func TestSignalLeavesNoPidfd(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "c", "n=0; trap 'n=$((n+1)); echo usr1 $n' USR1; trap 'exit 3' TERM; echo ready; while true; do sleep 1 & wait $!; done")
	st := e.start(pod, c)
	waitLog(t, c.LogPath, "stdout F ready")

	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := deadPidfds(t)
	const signals = 20
	for i := 1; i <= signals; i++ {
		if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		// One at a time: signals pending together merge into one.
		waitLog(t, c.LogPath, "stdout F usr1 "+strconv.Itoa(i))
	}
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if exit, err := e.rt.Wait(ctx, st.ID); err != nil || exit.ExitCode != 3 {
		t.Fatalf("exit %+v, %v; want the TERM trap's 3", exit, err)
	}
	e.destroy(st.ID)
	// Closed once the container is gone, not at the next collection.
	if after := deadPidfds(t); after > before {
		t.Errorf("%d pidfds of processes gone are open after %d signals and the container's exit, %d before", after, signals, before)
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// openNetns lists this process's fds that name network namespace ino.
func openNetns(t *testing.T, ino string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, fd := range fds {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); l == ino {
			open = append(open, fd.Name())
		}
	}
	return open
}

// A probe dialling into a pod while its sandbox is removed keeps nothing of
// it: the pod's network namespace is closed once the sandbox is gone, not
// kept open (and alive) by the daemon for ever. Found by the chaos soak: an
// idle daemon held the namespace of a pod long removed.
func TestDialDuringSandboxRemovalKeepsNoNamespace(t *testing.T) {
	e := newEnv(t)
	for i := range 20 {
		pod := e.pod(false)
		e.sandbox(pod)
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(e.rt.podDir(pod.UID), nsNet), &st); err != nil {
			t.Fatalf("the pod's network namespace: %v", err)
		}
		ino := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"
		stop := make(chan struct{})
		dialled := make(chan int)
		first := make(chan struct{}) // closed after the first dial: the dials run
		go func() {
			n := 0
			defer func() { dialled <- n }()
			defer func() {
				if n == 0 {
					close(first)
				}
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if c, err := e.rt.Dial(ctx, pod.UID, "tcp", "127.0.0.1:1"); err == nil {
					c.Close()
				}
				cancel()
				if n++; n == 1 {
					close(first)
				}
			}
		}()
		<-first
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
			t.Fatal(err)
		}
		close(stop)
		if n := <-dialled; n == 0 {
			t.Fatal("no dial ran beside the removal")
		}
		if open := openNetns(t, ino); len(open) > 0 {
			t.Fatalf("round %d: fds %v still name the removed pod's network namespace %s", i, open, ino)
		}
	}
}
