package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A misspelt field (comand:) is ignored, as the kubelet ignores it, and the
// pod runs; but the user sees it where they look, not only in the daemon's
// log: in ps's "Manifest problems", marked a warning, and as an event.
// run --once does not count it as a manifest that cannot be used.
func TestManifestUnknownFieldShown(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", "    comand: [\"httpd\"]\n"))
	d.WaitRunning("web", 30*time.Second)
	want := "web.yaml: warning: spec.containers[0].comand: unknown field, ignored"
	d.Eventually(10*time.Second, "the warning in ps -o wide", func() error {
		if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, "Manifest problems:") || !strings.Contains(out, want) {
			return fmt.Errorf("ps -o wide:\n%s", out)
		}
		return nil
	})
	d.Eventually(10*time.Second, "a ManifestWarning event", func() error {
		out := d.CLI("events")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "ManifestWarning") && strings.Contains(line, "web.yaml is used, but: spec.containers[0].comand: unknown field, ignored") {
				return nil
			}
		}
		return fmt.Errorf("events:\n%s", out)
	})
}
