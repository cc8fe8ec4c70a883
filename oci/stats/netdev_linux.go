//go:build linux && cgo

package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
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

// A pod with CAP_NET_ADMIN makes as many interfaces in its network
// namespace as it likes: a scrape reads at most netDevMax bytes of its
// /proc/net/dev (about 500 interfaces) and keeps the first maxInterfaces
// that cadvisor would list, so that neither the read nor the series a pod
// puts on /metrics/cadvisor grow with what it does.
const (
	netDevMax     = 64 << 10
	maxInterfaces = 32
)

// parseNetDev reads /proc/net/dev's table: per interface, the received
// bytes, packets, errors and drops (the 1st to 4th counters) and the same
// sent (the 9th to 12th). A last line cut short by netDevMax is left out.
func parseNetDev(b []byte) ([]podspec.InterfaceStats, error) {
	if len(b) >= netDevMax {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	var out []podspec.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 0; sc.Scan() && len(out) < maxInterfaces; n++ {
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
		if len(f) < 12 {
			return nil, fmt.Errorf("net/dev line %d: %d counters", n+1, len(f))
		}
		var v [8]uint64
		for i, col := range []int{0, 1, 2, 3, 8, 9, 10, 11} {
			x, err := strconv.ParseUint(f[col], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev line %d: %w", n+1, err)
			}
			v[i] = x
		}
		out = append(out, podspec.InterfaceStats{Name: name,
			RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDropped: v[3],
			TxBytes: v[4], TxPackets: v[5], TxErrors: v[6], TxDropped: v[7]})
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
	f, err := os.Open("/proc/thread-self/net/dev")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, netDevMax))
	if err != nil {
		return nil, err
	}
	return parseNetDev(b)
}
