package policy_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

// A FIFO (or a device) put where the policy file, a key it names or a
// signing key is expected is refused at once: the daemon reads the policy at
// its start and at every reload, and an open that waits for a writer would
// hold them for good.
func TestNotRegularFilesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"policy file": func() error { _, err := policy.Load(fifo); return err },
		"keyPath": func() error {
			_, err := policy.Parse([]byte(`{"default":[{"type":"sigstoreSigned","keyPath":"`+fifo+`"}]}`), "policy.json")
			return err
		},
		"signing key": func() error { _, err := sign.Load(fifo, nil); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- read() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s at a FIFO: %v, want it refused as not a regular file", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s at a FIFO: still reading after 10s", name)
		}
	}
}
