//go:build linux && cgo

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
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
func (m *Manager) Dial(ctx context.Context, podUID, network, addr string) (net.Conn, error) {
	pn, err := m.nets.pod(m, podUID)
	if err != nil {
		return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, err)
	}
	d := &net.Dialer{Control: lingerControl, FallbackDelay: -1}
	if pn.hostNetwork {
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
	var c net.Conn
	err = m.inPodNet(pn, func() (err error) {
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s in pod %s: %w", addr, podUID, err)
	}
	return c, nil
}

// inPodNet runs fn on a thread moved into pn's network namespace, which goes
// back to the daemon's namespace afterwards, or dies with its goroutine if it
// cannot: nothing else ever runs in the pod's namespace by mistake.
func (m *Manager) inPodNet(pn *podNet, fn func() error) error {
	self, err := m.nets.own()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := pn.enter(); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		err := fn()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread, still in the pod's namespace, ends with this goroutine
		done <- err
	}()
	return <-done
}

// InNetwork runs fn on a thread in pod podUID's network namespace, the
// host's for a hostNetwork pod, as Dial makes its sockets: a thread moved
// there for fn, which goes back to the daemon's namespace afterwards or
// dies with its goroutine, or for the host's this goroutine locked to its
// thread. It fails with an error wrapping podspec.ErrNotExist or
// fs.ErrNotExist when the pod has no sandbox.
func (m *Manager) InNetwork(podUID string, fn func() error) error {
	pn, err := m.nets.pod(m, podUID)
	if err != nil {
		return err
	}
	if pn.hostNetwork {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return fn()
	}
	return m.inPodNet(pn, fn)
}

// netCache keeps what Dial needs, so that a probe does not read the pod's
// record and open two namespace files each time: the daemon's own network
// namespace, and per pod its namespace, open, or that it has the host's.
// remove drops a pod's, which closes the namespace.
type netCache struct {
	mu   sync.Mutex
	self *os.File           // guarded by mu
	pods map[string]*podNet // by pod UID; guarded by mu
}

type podNet struct {
	hostNetwork bool
	mu          sync.RWMutex // guards ns: closed (nil) under the write lock
	ns          *os.File     // nil with the host's network, or once forgotten
}

// enter moves the calling thread into the pod's network namespace. The read
// lock keeps forget from closing the file (and its number from naming
// another file) while setns uses it.
func (pn *podNet) enter() error {
	pn.mu.RLock()
	defer pn.mu.RUnlock()
	if pn.ns == nil {
		return podspec.ErrNotExist
	}
	return unix.Setns(int(pn.ns.Fd()), unix.CLONE_NEWNET)
}

// own is the daemon's network namespace, opened once.
func (c *netCache) own() (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.self == nil {
		f, err := openOwn("ns/net")
		if err != nil {
			return nil, err
		}
		c.self = f
	}
	return c.self, nil
}

// openOwn opens name under /proc/thread-self for a thread that runs
// goroutines, each of which is in the daemon's own namespaces. Never
// /proc/self: that is the thread-group leader's, and the leader may be in a
// pod's namespaces for good. When a goroutine locked to its thread exits,
// the Go runtime ends that thread, except the main one, which it parks for
// ever as it is: makeNamespaces' goroutine, when it ran there, leaves the
// leader in the namespaces it made. Restoring "the daemon's namespace" from
// /proc/self/ns/net then moved every thread inPodNet used into a pod's, and
// the daemon's own connections (the manifest URL's) went to that pod's
// loopback.
func openOwn(name string) (*os.File, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return os.Open("/proc/thread-self/" + name)
}

func (c *netCache) pod(m *Manager, uid string) (*podNet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pn := c.pods[uid]; pn != nil {
		return pn, nil
	}
	pr, err := m.Record(uid)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return nil, err
	}
	pn := &podNet{hostNetwork: pr.HostNetwork}
	if !pr.HostNetwork {
		f, err := os.Open(filepath.Join(m.dir(uid), nsNet))
		if err != nil {
			return nil, err
		}
		pn.ns = f
	}
	if c.pods == nil {
		c.pods = map[string]*podNet{}
	}
	c.pods[uid] = pn
	return pn, nil
}

// forget drops what is kept of pod uid, closing its namespace; a Dial that
// took it before fails with ErrNotExist.
func (c *netCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pn := c.pods[uid]; pn != nil {
		pn.mu.Lock()
		if pn.ns != nil {
			pn.ns.Close()
			pn.ns = nil
		}
		pn.mu.Unlock()
	}
	delete(c.pods, uid)
}

// lingerControl sets what the kubelet's probe dialer sets: SO_LINGER of one
// second, so probes leave no sockets in TIME-WAIT for a minute.
func lingerControl(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	})
}
