//go:build linux && cgo

package oci

import (
	"os/exec"
	"strings"
	"testing"
)

// What a bridge plugin's DEL can leave of a pod (a POSTROUTING jump to a
// chain of its own, both commented with the pod's ID) is swept, and the
// rules of another ID are left alone.
func TestSweepNAT(t *testing.T) {
	if _, err := exec.LookPath("iptables-save"); err != nil {
		t.Skip("no iptables here")
	}
	id, other := "sweep"+randHex(8), "keep"+randHex(8)
	ipt := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("iptables", append([]string{"-w", "-t", "nat"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v\n%s", args, err, out)
		}
	}
	for i, x := range []string{id, other} {
		chain := "CNI-T" + x[len(x)-8:]
		comment := `name: "staticpodd" id: "` + x + `"`
		src := []string{"10.254.9.1", "10.254.9.2"}[i]
		ipt("-N", chain)
		ipt("-A", chain, "-d", "10.254.9.0/24", "-m", "comment", "--comment", comment, "-j", "ACCEPT")
		ipt("-A", "POSTROUTING", "-s", src, "-m", "comment", "--comment", comment, "-j", chain)
	}
	t.Cleanup(func() { sweepNAT(other) })
	if err := sweepNAT(id); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), id) || strings.Contains(string(out), "CNI-T"+id[len(id)-8:]) {
		t.Errorf("rules of %s left:\n%s", id, out)
	}
	if !strings.Contains(string(out), other) || !strings.Contains(string(out), ":CNI-T"+other[len(other)-8:]) {
		t.Errorf("rules of %s swept too:\n%s", other, out)
	}
	if err := sweepNAT(other); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("iptables-save", "-t", "nat").Output(); strings.Contains(string(out), other) {
		t.Errorf("rules of %s left:\n%s", other, out)
	}
}
