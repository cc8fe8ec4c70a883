//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// exitWatch waits for the exits of all the daemon's monitors in one
// goroutine: their pidfds in one epoll set, whose own descriptor waits in
// Go's netpoller. A goroutine per monitor, each parked on its own pidfd,
// cost a stack of 14 KiB on average per running container at rest (the
// runtime starts goroutines at the average size it scans), 1.4 MiB with
// 100 pods (docs/benchmarks.md).
type exitWatch struct {
	ep   *os.File // the epoll set, non-blocking, in the netpoller; never closed
	epfd int      // its number (ep.Fd would make it blocking)

	mu    sync.Mutex
	waits map[int32]exitWait // by pidfd number; guarded by mu
}

type exitWait struct {
	pidfd *os.File
	then  func()
}

var theExitWatch struct {
	once sync.Once
	w    *exitWatch
	err  error
}

// onExit calls then, in a goroutine of its own, once the process of pidfd
// has exited, and closes pidfd before. Without an epoll set it waits in a
// goroutine of its own.
func onExit(pidfd *os.File, then func()) {
	theExitWatch.once.Do(func() { theExitWatch.w, theExitWatch.err = newExitWatch() })
	err := theExitWatch.err
	if err == nil {
		err = theExitWatch.w.add(pidfd, then)
	}
	if err != nil {
		go func() {
			awaitExit(pidfd)
			then()
		}()
	}
}

func newExitWatch() (*exitWatch, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	w := &exitWatch{ep: os.NewFile(uintptr(fd), "monitor-exits"), epfd: fd, waits: map[int32]exitWait{}}
	if _, err := w.ep.SyscallConn(); err != nil {
		_ = w.ep.Close()
		return nil, err
	}
	go w.run()
	return w, nil
}

// add watches pidfd; an exited process is seen at once (epoll reports a
// readable pidfd as soon as it is added).
func (w *exitWatch) add(pidfd *os.File, then func()) error {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return err
	}
	err = errors.New("pidfd closed")
	_ = rc.Control(func(fd uintptr) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.waits[int32(fd)] = exitWait{pidfd, then}
		err = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, int(fd), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
		if err != nil {
			delete(w.waits, int32(fd))
		}
	})
	return err
}

// run reports exits until the daemon ends. Each exited pidfd leaves the set
// before it is closed, so that its number, used again, is a new entry.
func (w *exitWatch) run() {
	rc, err := w.ep.SyscallConn()
	if err != nil {
		return
	}
	events := make([]unix.EpollEvent, 64)
	for {
		n := 0
		// Go's netpoller reports the set once it becomes ready; it is
		// drained before the next wait.
		err := rc.Read(func(fd uintptr) bool {
			var err error
			n, err = unix.EpollWait(int(fd), events, 0)
			if err != nil {
				n = 0
			}
			return n > 0
		})
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			w.exited(ev.Fd)
		}
	}
}

func (w *exitWatch) exited(fd int32) {
	w.mu.Lock()
	wait, ok := w.waits[fd]
	if ok {
		delete(w.waits, fd)
		_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	}
	w.mu.Unlock()
	if !ok {
		return
	}
	_ = wait.pidfd.Close()
	go wait.then()
}
