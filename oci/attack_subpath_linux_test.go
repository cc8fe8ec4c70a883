//go:build linux && cgo

package oci

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// attackerUID is a container's runAsUser: not root, so the volume's mode is
// all it has to go by.
const attackerUID = 1000

// asUser runs f on a thread of its own whose credentials are uid's only
// (setresuid on one thread, not the process), as a container process would
// be. The thread is never given back to the scheduler.
func asUser(uid int, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			panic(e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			panic(e)
		}
		f()
	}()
	<-done
}

// mkdirMode makes the subPath directory, then opens it again by name to
// chmod it. A container that can write the volume (an emptyDir is 0777, not
// sticky) swaps that name, between the mkdirat and the openat, with a
// directory it does not own: the daemon chmods that one to the volume's mode.
// Here a runAsUser container gets a root container's 0700 directory made
// 0777. The kubelet's doSafeMakeDir has the same window.
func TestAttackSubPathMkdirChmodsSwappedDir(t *testing.T) {
	testroot.Require(t)
	const attempts = 3000
	for i := 0; i < attempts; i++ {
		_, vol := hostileVolume(t)
		private := filepath.Join(vol, "private") // a root container's, 0700
		if err := os.Mkdir(private, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(private, "key"), []byte("root only"), 0o600); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(private, &st); err != nil {
			t.Fatal(err)
		}
		// The container's view of the volume: its own mount, whatever the
		// host's path to it (the test's temp dirs are 0700).
		volFd, err := unix.Open(vol, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			asUser(attackerUID, func() {
				for !stop.Load() {
					err := unix.Renameat2(volFd, "sub", volFd, "private", unix.RENAME_EXCHANGE)
					if err != nil && !errors.Is(err, unix.ENOENT) {
						t.Errorf("exchange as uid %d: %v", attackerUID, err)
						return
					}
				}
			})
		}()
		f, err := openSubPath(vol, "sub")
		stop.Store(true)
		wg.Wait()
		unix.Close(volFd)
		if err == nil {
			f.Close()
		}
		// Find the root container's directory wherever the swaps left it.
		for _, name := range []string{"sub", "private"} {
			var got unix.Stat_t
			if err := unix.Stat(filepath.Join(vol, name), &got); err != nil || got.Ino != st.Ino {
				continue
			}
			if got.Mode&0o7777 == 0o700 {
				continue
			}
			// The container, still uid 1000, reads and replaces root's key.
			volFd, err := unix.Open(vol, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			var werr error
			asUser(attackerUID, func() {
				dfd, err := unix.Openat(volFd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					werr = err
					return
				}
				defer unix.Close(dfd)
				if werr = unix.Renameat(dfd, "key", dfd, "stolen"); werr != nil {
					return
				}
				fd, err := unix.Openat(dfd, "key", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				if err == nil {
					unix.Close(fd)
				}
				werr = err
			})
			unix.Close(volFd)
			t.Fatalf("attempt %d: the daemon chmodded a directory it did not make (uid %d, 0700) to %#o; as uid %d the container then replaced root's key in it: %v",
				i, got.Uid, got.Mode&0o7777, attackerUID, werr)
		}
	}
	t.Logf("%d starts under a swapping container: no foreign directory chmodded", attempts)
}

// A daemon killed between binding a container's subPaths and writing its
// record leaves the binds under a state dir with no record: the next daemon's
// orphan sweep must unmount them, not remove the volume through them.
func TestAttackSubPathBindsLeftByKilledStartAreSwept(t *testing.T) {
	e := newEnv(t)
	_, vol := hostileVolume(t)
	if err := os.MkdirAll(vol+"/data", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vol+"/data/keep", []byte("volume data"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := randHex(16)
	dir := e.rt.containerDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ms, err := bindSubPaths(filepath.Join(dir, subPathsDir), []podspec.Mount{
		{Destination: "/d", Type: "bind", Source: vol, SubPath: "data"},
		{Destination: "/f", Type: "bind", Source: vol, SubPath: "data/keep"},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.newRuntime() // the next daemon
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.Contains(string(mi), " "+m.Source+" ") {
			t.Errorf("bind %s left mounted after the orphan sweep", m.Source)
			_ = unix.Unmount(m.Source, unix.MNT_DETACH)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir left: %v", err)
	}
	if b, err := os.ReadFile(vol + "/data/keep"); err != nil || string(b) != "volume data" {
		t.Errorf("the volume lost data to the sweep: %q %v", b, err)
	}
}

// A FIFO with no writer, a listening socket and device nodes at subPaths:
// the daemon opens them with O_PATH and binds them without blocking or
// opening the device.
func TestAttackSubPathSpecialFilesDoNotBlock(t *testing.T) {
	testroot.Require(t)
	_, vol := hostileVolume(t)
	if err := unix.Mkfifo(vol+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(vol+"/disk", unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil { // a loop device that does not exist
		t.Fatal(err)
	}
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	if err := unix.Bind(sock, &unix.SockaddrUnix{Name: vol + "/sock"}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(sock, 1); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "ctr")
	done := make(chan error, 1)
	go func() {
		_, err := bindSubPaths(filepath.Join(state, subPathsDir), []podspec.Mount{
			{Destination: "/f", Type: "bind", Source: vol, SubPath: "fifo"},
			{Destination: "/d", Type: "bind", Source: vol, SubPath: "disk"},
			{Destination: "/s", Type: "bind", Source: vol, SubPath: "sock"},
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("binding a FIFO, a socket or a device node blocked the daemon")
	}
	if err := unmountSubPaths(state); err != nil {
		t.Fatal(err)
	}
}
