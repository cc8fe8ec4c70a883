package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// make demo-clean removes the default network's bridge the demo's pods were
// on, and keeps one that another daemon's pod is still on. Run in a network
// namespace of its own (its sysfs mounted in a mount namespace of its own),
// on bridges of the test's, through the Makefile's own demo-clean-bridge.
func TestDemoCleanRemovesBridge(t *testing.T) {
	testroot.Require(t)
	for _, tool := range []string{"make", "unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	t.Parallel()
	script := `set -e
mount -t sysfs sysfs /sys
ip link add demobr0 type bridge
make -C .. demo-clean-bridge DEMO_BRIDGE=demobr0
if ip link show demobr0 >/dev/null 2>&1; then echo "demobr0 LEFT"; else echo "demobr0 GONE"; fi
ip link add demobr1 type bridge
ip link add veth-pod type veth peer name veth-host
ip link set veth-host master demobr1
make -C .. demo-clean-bridge DEMO_BRIDGE=demobr1
if ip link show demobr1 >/dev/null 2>&1; then echo "demobr1 KEPT"; else echo "demobr1 GONE"; fi
make -C .. demo-clean-bridge DEMO_BRIDGE=nosuchbr0
`
	b, err := exec.Command("unshare", "--net", "--mount", "sh", "-c", script).CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"make demo-clean: bridge demobr0 removed", "demobr0 GONE",
		"make demo-clean: bridge demobr1 kept: pods of another staticpodd are on it", "demobr1 KEPT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
