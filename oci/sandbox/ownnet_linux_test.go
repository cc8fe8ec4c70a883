//go:build linux && cgo

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/oci/stats"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// leaderNetEnv makes the test binary a stand-in daemon whose main thread is
// in a network namespace of its own, as makeNamespaces leaves it when its
// goroutine ran there (the Go runtime parks a main thread whose locked
// goroutine exits, in whatever namespaces it is). The value is the host's
// network namespace, as readlink shows it.
const leaderNetEnv = "OCI_TEST_LEADER_NET"

func TestMain(m *testing.M) {
	if host := os.Getenv(leaderNetEnv); host != "" {
		os.Exit(leaderInPodNet(host))
	}
	os.Exit(m.Run())
}

func init() {
	if os.Getenv(leaderNetEnv) != "" {
		// The main goroutine keeps the main thread, so that it alone moves.
		runtime.LockOSThread()
	}
}

// The daemon's own network namespace is the one its goroutines run in, not
// the main thread's: with the main thread left in a pod's, inPodNet must
// still bring its threads back to the host's, the daemon's connections must
// still reach the host's loopback, and the node's network stats must be the
// host's.
func TestOwnNetNotTheMainThreads(t *testing.T) {
	testroot.Require(t)
	// The test binary's own namespace is a thread's that runs goroutines,
	// as the daemon's is: an earlier test's sandbox may have left the main
	// thread in a pod's (see openOwn).
	runtime.LockOSThread()
	host, err := os.Readlink("/proc/thread-self/ns/net")
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), leaderNetEnv+"="+host)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stand-in daemon: %v\n%s", err, out)
	}
	t.Logf("stand-in daemon:\n%s", out)
}

// leaderInPodNet is the stand-in daemon of TestOwnNetNotTheMainThreads; it
// runs on the main goroutine, locked to the main thread, and says what is
// wrong on stderr with exit code 1.
func leaderInPodNet(host string) int {
	if err := checkLeaderInPodNet(host); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func checkLeaderInPodNet(host string) error {
	// A listener on the host's loopback, made on another thread before the
	// main thread moves.
	ln := make(chan net.Listener, 1)
	go func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		ln <- l
	}()
	l := <-ln
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	// The main thread goes to a namespace of its own, with an interface
	// the host has not, and stays there.
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if out, err := exec.Command("ip", "link", "add", "podonly0", "type", "veth", "peer", "name", "podonly1").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link add: %v: %s", err, out)
	}
	pod, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer pod.Close()
	podName, _ := os.Readlink("/proc/thread-self/ns/net")

	// What follows runs on other threads while the main one waits.
	done := make(chan error, 1)
	go func() { done <- checkOwnNet(host, podName, pod, l.Addr().String()) }()
	return <-done
}

func checkOwnNet(host, podName string, pod *os.File, addr string) error {
	m := &Manager{}
	self, err := m.nets.own()
	if err != nil {
		return err
	}
	if got, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", self.Fd())); got != host {
		return fmt.Errorf("the daemon's own network namespace is %s, want the host's %s (the main thread is in %s)", got, host, podName)
	}
	ifs, err := stats.HostNetDev()
	if err != nil {
		return err
	}
	for _, s := range ifs {
		if s.Name == "podonly0" {
			return fmt.Errorf("the node's network stats are the main thread's namespace's: %+v", ifs)
		}
	}

	// Many goroutines at once go into "the pod" and back, so that several
	// threads do; then every thread but the main one must be in the host's
	// namespace, and every dial must reach the host's listener.
	pn := &podNet{ns: pod}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			errs[i] = m.inPodNet(pn, func() error {
				if ns, _ := os.Readlink("/proc/thread-self/ns/net"); ns != podName {
					return fmt.Errorf("inPodNet ran in %s, want %s", ns, podName)
				}
				return nil
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var wrong []string
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		if task.Name() == fmt.Sprint(os.Getpid()) {
			continue // the main thread, which stays where it went
		}
		if ns, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net"); err == nil && ns != host {
			wrong = append(wrong, task.Name()+" in "+ns)
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("threads left out of the host's network namespace %s: %s", host, strings.Join(wrong, ", "))
	}
	for i := range 50 {
		ch := make(chan error, 1)
		go func() {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			ch <- err
		}()
		if err := <-ch; err != nil {
			return fmt.Errorf("dial %d of the host's listener: %w", i, err)
		}
	}
	fmt.Printf("own network namespace %s with the main thread in %s; %d threads checked\n", host, podName, len(tasks))
	return nil
}
