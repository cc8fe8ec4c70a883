package testnet

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// The rules a killed run left on a range (the bridge plugin's masquerade
// chain and its jump, with a quoted comment) are removed, and nothing else.
func TestPurgeRules(t *testing.T) {
	testroot.Require(t)
	n := Net{Bridge: "spdtpurge", Subnet: netip.MustParsePrefix("10.97.250.0/24")}
	const chain = "CNI-testpurge0123456789ab"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", args, err, out)
		}
	}
	comment := `name: "staticpodd" id: "deadbeef"`
	run("-t", "nat", "-N", chain)
	run("-t", "nat", "-A", chain, "-d", "10.97.250.0/24", "-m", "comment", "--comment", comment, "-j", "ACCEPT")
	run("-t", "nat", "-A", chain, "!", "-d", "224.0.0.0/4", "-m", "comment", "--comment", comment, "-j", "MASQUERADE")
	run("-t", "nat", "-A", "POSTROUTING", "-s", "10.97.250.7/32", "-m", "comment", "--comment", comment, "-j", chain)
	before, _ := exec.Command("iptables-save", "-t", "nat").Output()
	if !strings.Contains(string(before), chain) {
		t.Fatal("the rules were not made")
	}
	if err := n.purgeRules(); err != nil {
		t.Fatal(err)
	}
	after, _ := exec.Command("iptables-save", "-t", "nat").Output()
	if strings.Contains(string(after), chain) || strings.Contains(string(after), "10.97.250.") {
		t.Errorf("left after the purge:\n%s", after)
	}
}
