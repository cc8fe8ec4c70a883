//go:build linux && cgo

package stats

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestParseNetDev(t *testing.T) {
	in := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  123456     100    0    0    0     0          0         0   123456     100    0    0    0     0       0          0
  eth0: 9876543   12345    7    0    0     0          0         3  5432100    4321    2    0    0     0       0          0
vethab12:    10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0
 wlan0:       1       2    3    4    5     6          7         8        9      10   11   12   13    14      15         16
`
	got, err := parseNetDev([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []podspec.InterfaceStats{
		{Name: "eth0", RxBytes: 9876543, RxPackets: 12345, RxErrors: 7, TxBytes: 5432100, TxPackets: 4321, TxErrors: 2},
		{Name: "wlan0", RxBytes: 1, RxPackets: 2, RxErrors: 3, RxDropped: 4, TxBytes: 9, TxPackets: 10, TxErrors: 11, TxDropped: 12},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v (lo and veth left out, as cadvisor does)", got, want)
	}
	for _, bad := range []string{"h\nh\n eth0 1 2 3\n", "h\nh\n eth0: 1 2 3\n", "h\nh\n eth0: x 0 0 0 0 0 0 0 0 0 0 0\n"} {
		if _, err := parseNetDev([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestParseNetDevBounded: a namespace with thousands of interfaces, which a
// pod with CAP_NET_ADMIN can make, gives the first maxInterfaces, and a
// table cut short at netDevMax gives no error.
func TestParseNetDevBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("h\nh\n")
	for i := 0; b.Len() < 2*netDevMax; i++ {
		fmt.Fprintf(&b, "  x%d: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", i)
	}
	got, err := parseNetDev([]byte(b.String())[:netDevMax])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxInterfaces || got[0].Name != "x0" || got[0].TxDropped != 12 {
		t.Errorf("%d interfaces, first %+v; want %d from x0", len(got), got[0], maxInterfaces)
	}
}
