//go:build linux && cgo

package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// scannerParseNetDev is parseNetDev as it was, with bufio.Scanner and
// strings.Fields: the in-place parser must give the same for any input.
func scannerParseNetDev(b []byte) ([]podspec.InterfaceStats, error) {
	if len(b) >= netDevMax {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	var out []podspec.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 0; sc.Scan() && len(out) < maxInterfaces; n++ {
		if n < 2 {
			continue
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

// netDevOdd are tables a kernel does not write, and one it does: each
// parses as the scanner-based parser parsed it.
func netDevOdd() []string {
	const h = "Inter-|   Receive |  Transmit\n face |bytes packets|bytes packets\n"
	const row = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16"
	long := strings.Repeat("9", bufio.MaxScanTokenSize)
	return []string{
		"", "\n", "\n\n", h, h + "\n", "h", "h\nh", "h\r\nh\r\n eth0: " + row + "\r\n",
		h + "  eth0: " + row + "\n",
		h + "  eth0: " + row, // no trailing newline
		h + "  eth0:" + row + "\n",
		h + "eth0:\t" + strings.ReplaceAll(row, " ", "\t\v\f") + "\n",
		h + "  eth0: " + row + " 17 18 junk\n",                                          // more counters than 16
		h + "  eth0: 1 2 3 4 5 6 7 8 9 10 11\n",                                         // 11: too few
		h + "  eth0 " + row + "\n",                                                      // no colon
		h + "  eth0: " + row + "\n  lo1: x\n",                                           // lo prefixes: ignored unread
		h + "  veth0: x\n  docker0: y\n  nerdctl0: z\n",                                 // all ignored
		h + " a:b: " + row + "\n",                                                       // a second colon
		h + " \u00a0eth0\u0085: " + strings.ReplaceAll(row, " ", "\u2003") + "\n",       // Unicode spaces
		h + " \xffeth0: " + strings.ReplaceAll(row, " ", " \xff ") + "\n",               // invalid UTF-8
		h + " eth0: 18446744073709551615 2 3 4 5 6 7 8 18446744073709551616 10 11 12\n", // max, then one more
		h + " eth0: -1 2 3 4 5 6 7 8 9 10 11 12\n",
		h + " eth0: +1 2 3 4 5 6 7 8 9 10 11 12\n",
		h + " eth0: 0x1 2 3 4 5 6 7 8 9 10 11 12\n",
		h + " eth0: " + strings.Repeat("1", 40) + " 2 3 4 5 6 7 8 9 10 11 12\n", // a huge number
		h + " : " + row + "\n",                                                  // no name
		h + "\x00: " + row + "\n",
		h + " eth0: " + long[:100] + " 2 3 4 5 6 7 8 9 10 11 12\n",
		long,                        // one line, as long as the scanner's token: too long
		long[1:],                    // a byte shorter: one header line
		long + "\n",                 // too long with its newline
		long[1:] + "\n" + "h\n",     // fits with its newline
		"h\n" + long[2:] + "\n" + h, // the second header line just fits
		h + " eth0: " + long + "\n", // an interface's line too long
		h + strings.Repeat(" x: "+row+"\n", maxInterfaces) + long + "\n", // too long after the last interface kept
		h + strings.Repeat(" x: "+row+"\n", maxInterfaces+5),
	}
}

func TestParseNetDevSameAsScanner(t *testing.T) {
	for _, in := range netDevOdd() {
		got, err := parseNetDev([]byte(in))
		want, wantErr := scannerParseNetDev([]byte(in))
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%.80q...: got %+v, %v; the scanner's %+v, %v", in, got, err, want, wantErr)
		}
	}
	// Cut short at netDevMax, with and without a newline to cut at.
	var b strings.Builder
	b.WriteString("h\nh\n")
	for i := 0; b.Len() < 2*netDevMax; i++ {
		fmt.Fprintf(&b, "  x%d: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", i%7)
	}
	for _, in := range [][]byte{[]byte(b.String())[:netDevMax], bytes.Repeat([]byte{'a'}, netDevMax)} {
		got, err := parseNetDev(in)
		want, wantErr := scannerParseNetDev(in)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%.80q...: got %+v, %v; the scanner's %+v, %v", in, got, err, want, wantErr)
		}
	}
}

func FuzzParseNetDev(f *testing.F) {
	for _, in := range netDevOdd() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := parseNetDev(in)
		want, wantErr := scannerParseNetDev(in)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %+v, %v; the scanner's %+v, %v", in, got, err, want, wantErr)
		}
	})
}

// The housekeeping's read of the table allocates the interfaces it returns
// and their names, not a copy of the table or of its lines.
func TestThreadNetDevAllocs(t *testing.T) {
	got, err := HostNetDev()
	if err != nil {
		t.Skipf("no network device table: %v", err)
	}
	n := testing.AllocsPerRun(20, func() { _, _ = HostNetDev() })
	// os.Open's file and its name, the slice of interfaces as it grows,
	// a name each.
	if max := float64(4 + 2*len(got) + 1); n > max {
		t.Errorf("%v allocations for %d interfaces, want at most %v", n, len(got), max)
	}
}
