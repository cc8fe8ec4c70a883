//go:build linux && cgo

package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// netDevIgnored are the interface name prefixes cadvisor leaves out of a
// container's network stats (its isIgnoredDevice), and so the kubelet's
// summary: loopback, and the host ends of containers' veth pairs.
var netDevIgnored = []string{"lo", "veth", "docker", "nerdctl"}

// parseNetDev reads /proc/net/dev's table: per interface, received bytes
// and errors (the 1st and 3rd counters), sent bytes and errors (the 9th
// and 11th).
func parseNetDev(b []byte) ([]podspec.InterfaceStats, error) {
	var out []podspec.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 0; sc.Scan(); n++ {
		if n < 2 {
			continue // the two header lines
		}
		name, counters, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("net/dev line %d: no interface name", n+1)
		}
		name = strings.TrimSpace(name)
		ignored := false
		for _, p := range netDevIgnored {
			ignored = ignored || strings.HasPrefix(name, p)
		}
		if ignored {
			continue
		}
		f := strings.Fields(counters)
		if len(f) < 11 {
			return nil, fmt.Errorf("net/dev line %d: %d counters", n+1, len(f))
		}
		var v [4]uint64
		for i, col := range []int{0, 2, 8, 10} {
			x, err := strconv.ParseUint(f[col], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev line %d: %w", n+1, err)
			}
			v[i] = x
		}
		out = append(out, podspec.InterfaceStats{Name: name, RxBytes: v[0], RxErrors: v[1], TxBytes: v[2], TxErrors: v[3]})
	}
	return out, sc.Err()
}

// HostNetDev is the interfaces of the daemon's own network namespace: that
// of a thread that runs goroutines, not the thread-group leader's, which
// may be a pod's: the Go runtime parks a main thread whose locked goroutine
// exits, in whatever namespaces it was.
func HostNetDev() ([]podspec.InterfaceStats, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return ThreadNetDev()
}

// ThreadNetDev is the interfaces of the calling thread's network namespace,
// to which the caller has locked its goroutine: a pod's, read from a thread
// moved into it, as the sandbox package's Dial makes its sockets.
func ThreadNetDev() ([]podspec.InterfaceStats, error) {
	b, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		return nil, err
	}
	return parseNetDev(b)
}
