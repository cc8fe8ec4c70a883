//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Dial connects to addr from inside the network namespace of pod podUID, the
// host's for a hostNetwork pod, so a probe reaches what a container listens
// on without anything published on the host or installed in the image.
//
// The socket is made on a thread moved into the pod's namespace (a socket
// belongs to the namespace it was made in), which goes back to the daemon's
// namespace afterwards, or dies with its goroutine if it cannot. addr's host
// is resolved first, in the daemon's namespace, so that one socket is made
// on that thread and no happy-eyeballs racer makes one elsewhere.
func (r *Runtime) Dial(ctx context.Context, podUID, network, addr string) (net.Conn, error) {
	var pr podRecord
	if err := readJSON(filepath.Join(r.podDir(podUID), podFile), &pr); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, err)
	}
	d := &net.Dialer{Control: lingerControl, FallbackDelay: -1}
	if pr.HostNetwork {
		return d.DialContext(ctx, network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, err)
	}
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, err)
		}
		addr = net.JoinHostPort(ips[0].String(), port)
	}
	ns, err := os.Open(filepath.Join(r.podDir(podUID), nsNet))
	if err != nil {
		return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, err)
	}
	defer ns.Close()
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, err}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("enter network namespace: %w", err)}
			return
		}
		c, err := d.DialContext(ctx, network, addr)
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread, still in the pod's namespace, ends with this goroutine
		done <- result{c, err}
	}()
	res := <-done
	if res.err != nil {
		return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, res.err)
	}
	return res.c, nil
}

// lingerControl sets what the kubelet's probe dialer sets: SO_LINGER of one
// second, so probes leave no sockets in TIME-WAIT for a minute.
func lingerControl(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	})
}
