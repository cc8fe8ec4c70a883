//go:build linux && cgo

package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/staticpodd/staticpodd/agent/host"
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
// It parses b in place (the housekeeping reads the table every 10 s): lines
// as bufio.Scanner's ScanLines splits them (a trailing \r dropped; a line
// longer than bufio.MaxScanTokenSize is an error) and counters as
// strings.Fields splits them, with no copy of either.
func parseNetDev(b []byte) ([]podspec.InterfaceStats, error) {
	if len(b) >= netDevMax {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	var out []podspec.InterfaceStats
	for n := 0; ; n++ {
		line, rest, err := scanLine(b)
		if err != nil {
			return out, err
		}
		if line == nil || len(out) >= maxInterfaces {
			break
		}
		b = rest
		if n < 2 {
			continue // the two header lines
		}
		name, counters, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return nil, fmt.Errorf("net/dev line %d: no interface name", n+1)
		}
		name = bytes.TrimSpace(name)
		ignored := false
		for _, p := range netDevIgnored {
			ignored = ignored || bytes.HasPrefix(name, []byte(p))
		}
		if ignored {
			continue
		}
		var f [12][]byte
		nf := 0
		for c := counters; ; nf++ {
			var field []byte
			if field, c = host.NextField(c); field == nil {
				break
			}
			if nf < len(f) {
				f[nf] = field
			}
		}
		if nf < 12 {
			return nil, fmt.Errorf("net/dev line %d: %d counters", n+1, nf)
		}
		var v [8]uint64
		for i, col := range []int{0, 1, 2, 3, 8, 9, 10, 11} {
			x, err := strconv.ParseUint(string(f[col]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev line %d: %w", n+1, err)
			}
			v[i] = x
		}
		out = append(out, podspec.InterfaceStats{Name: string(name),
			RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDropped: v[3],
			TxBytes: v[4], TxPackets: v[5], TxErrors: v[6], TxDropped: v[7]})
	}
	return out, nil
}

// scanLine splits the first line off b as a bufio.Scanner with ScanLines
// and its default buffer would: the line without its \n and one trailing
// \r; a last line without \n if not empty; nil at the end. As the
// Scanner's, a line that with its \n does not fit bufio.MaxScanTokenSize
// bytes (a last one without \n: that is as long) is bufio.ErrTooLong.
func scanLine(b []byte) (line, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, nil
	}
	i := bytes.IndexByte(b, '\n')
	switch {
	case i < 0 && len(b) >= bufio.MaxScanTokenSize, i >= bufio.MaxScanTokenSize:
		return nil, nil, bufio.ErrTooLong
	case i < 0:
		line, rest = b, b[len(b):]
	default:
		line, rest = b[:i], b[i+1:]
	}
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest, nil
}

// netDevBufs are ThreadNetDev's buffers, doubled as a table needs up to
// netDevMax and kept so for the next read: the host's table has a line for
// the host end of each pod's veth pair (about 130 bytes each: 20 KiB with
// 150 pods), and a buffer dropped at a bound below that was grown again on
// every read. A pod's large table leaves at most netDevMax in the pool.
var netDevBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

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
// moved into it, as the sandbox package's Dial makes its sockets. It reads
// at most netDevMax bytes (as io.ReadAll of an io.LimitReader did), into a
// pooled buffer.
func ThreadNetDev() ([]podspec.InterfaceStats, error) {
	f, err := os.Open("/proc/thread-self/net/dev")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := netDevBufs.Get().(*[]byte)
	defer netDevBufs.Put(buf)
	b := (*buf)[:0]
	for len(b) < netDevMax {
		if len(b) == cap(b) {
			b = append(make([]byte, 0, min(max(2*cap(b), 4<<10), netDevMax)), b...)
		}
		n, err := f.Read(b[len(b):min(cap(b), netDevMax)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	*buf = b
	return parseNetDev(b)
}
