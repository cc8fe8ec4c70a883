// Package testroot gates tests that need root, real namespaces and cgroups.
package testroot

import (
	"os"
	"testing"
)

// Require skips t when not running as root, or fails it when STATICPODD_TEST_ROOT=1
// (CI sets it), so that a root test never reports PASS without having run.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("STATICPODD_TEST_ROOT") == "1" {
		t.Fatal("STATICPODD_TEST_ROOT=1 but not running as root")
	}
	t.Skip("needs root (set STATICPODD_TEST_ROOT=1 to make this a failure)")
}
