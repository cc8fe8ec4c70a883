package main

import (
	"strings"
	"testing"
)

// The test-only settings are run flags hidden from --help.
func TestTestHooksAreHiddenFlags(t *testing.T) {
	cmd := newRunCmd()
	for _, name := range []string{"test-node-cgroup", "test-no-memory-notifier"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Hidden {
			t.Errorf("run --%s: %+v, want a hidden flag", name, f)
		}
		if strings.Contains(cmd.UsageString(), name) {
			t.Errorf("run --help shows --%s", name)
		}
	}
}
