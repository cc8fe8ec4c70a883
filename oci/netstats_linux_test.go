//go:build linux && cgo

package oci

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// A pod's network stats are those of its own namespace: what is sent from
// inside it is counted on its interface, and nothing of the host's shows.
func TestPodNetworkStats(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	defer e.rt.RemoveSandbox(context.Background(), pod.UID)
	ns := filepath.Join(e.rt.podDir(pod.UID), nsNet)
	// An eth0 of its own: one end of a veth pair whose other end (left out
	// of the stats, as a veth) is in the pod too, and a neighbour entry so
	// that what is sent goes out at once, with no ARP.
	if out, err := exec.Command("nsenter", "--net="+ns, "sh", "-c",
		"ip link add eth0 type veth peer name vethpeer && ip addr add 10.253.0.1/24 dev eth0 && "+
			"ip link set vethpeer up && ip link set eth0 up && "+
			"ip neigh add 10.253.0.2 lladdr 02:00:00:00:00:02 dev eth0").CombinedOutput(); err != nil {
		t.Fatalf("make eth0 in the pod: %v\n%s", err, out)
	}
	c, err := e.rt.Dial(context.Background(), pod.UID, "udp", "10.253.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1000)
	for range 5 {
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	sum, err := e.rt.Stats(context.Background())
	if err != nil {
		t.Logf("stats: %v", err)
	}
	for _, p := range sum.Pods {
		if p.UID != pod.UID {
			continue
		}
		// 5 datagrams of 1042 bytes with their headers, and the few the
		// kernel sends of itself on a new link (IPv6's): not the host's.
		if len(p.Network) != 1 || p.Network[0].Name != "eth0" || p.Network[0].TxBytes < 5210 || p.Network[0].TxBytes > 10000 {
			t.Fatalf("pod network %+v, want its eth0 alone with the 5210 bytes sent", p.Network)
		}
		return
	}
	t.Fatalf("no stats of the pod in %+v", sum.Pods)
}
