//go:build linux && cgo

package stats

import (
	"reflect"
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
		{Name: "eth0", RxBytes: 9876543, RxErrors: 7, TxBytes: 5432100, TxErrors: 2},
		{Name: "wlan0", RxBytes: 1, RxErrors: 3, TxBytes: 9, TxErrors: 11},
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
