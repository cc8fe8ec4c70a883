//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Address is the node's address: kubeadm refuses a loopback advertise
// address, so the control plane gets this one, on a dummy interface in a
// network namespace of the test's own (192.0.2.0/24 is TEST-NET-1, never
// routed anywhere). That namespace has no other interface than lo and that
// one, a veth whose peer is in the namespace too, and no route out:
// all the control plane's traffic stays in it, and its ports (6443, 2379,
// 2380, 2381, 10257, 10259) collide with nothing on the host.
const Address = "192.0.2.10"

// Netns is a network namespace made with ip netns add: lo up, and a veth
// pair, both ends in it, one holding Address. (A veth rather than a dummy
// interface: not every kernel here has the dummy driver.)
type Netns struct {
	Name string
	Path string // /run/netns/<name>
}

// NewNetns makes the namespace name with lo up and Address on node0.
func NewNetns(name string) (*Netns, error) { return NewNetnsAt(name, Address) }

// NewNetnsAt is NewNetns with addr in place of Address, for a second node.
func NewNetnsAt(name, addr string) (*Netns, error) {
	n := &Netns{Name: name, Path: "/run/netns/" + name}
	steps := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "link", "add", "node0", "type", "veth", "peer", "name", "node1"},
		{"-n", name, "addr", "add", addr + "/32", "dev", "node0"},
		{"-n", name, "link", "set", "node1", "up"},
		{"-n", name, "link", "set", "node0", "up"},
	}
	for i, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			if i > 0 {
				n.Close()
			}
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return n, nil
}

// Close removes the namespace; it goes once no process is left in it.
func (n *Netns) Close() error {
	if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", n.Name, err, out)
	}
	return nil
}

// Command is name run in the namespace, by nsenter, which changes only the
// network namespace and execs name in its place (unlike ip netns exec, which
// also mounts a /sys of its own over the host's, cgroups included).
func (n *Netns) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.Path, "--", name}, args...)...)
}

// Wrap is the command prefix that runs a program in the namespace.
func (n *Netns) Wrap() []string { return []string{"nsenter", "--net=" + n.Path, "--"} }

// DialContext connects from inside the namespace. A socket belongs to the
// namespace it was made in, so the dial happens on an OS thread moved into the
// namespace, and locked to a goroutine that never unlocks it: the thread ends
// with the goroutine, and no other goroutine ever runs in the namespace.
func (n *Netns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(n.Path)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns %s: %w", n.Path, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// Inode is the namespace's inode: a process runs in it when its
// /proc/<pid>/ns/net has this inode.
func (n *Netns) Inode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(n.Path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", n.Path, err)
	}
	return st.Ino, nil
}
