package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// A refusal wrapped by the puller reads from SignatureValidationFailed on,
// as a CRI runtime gives it, and is still the policy's error; any other
// error is left as it is.
func TestRefusal(t *testing.T) {
	refused := fmt.Errorf("pull docker.io/library/nginx:1.27: %w: no signature by key cosign.pub", policy.ErrSignatureValidationFailed)
	err := refusal(refused)
	if got, want := err.Error(), "SignatureValidationFailed: no signature by key cosign.pub"; got != want {
		t.Errorf("refusal: %q, want %q", got, want)
	}
	if !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Error("the refusal no longer wraps the policy's error")
	}
	other := errors.New("pull docker.io/library/nginx:1.27: MANIFEST_UNKNOWN")
	if refusal(other) != other {
		t.Error("another error was changed")
	}
	if refusal(nil) != nil {
		t.Error("nil is not nil")
	}
}

// A policy file that does not parse is an error naming the value, the
// file, the field of it and why; none is no policy.
func TestImagePolicyErrors(t *testing.T) {
	if p, err := ImagePolicy(&config.Config{}); p != nil || err != nil {
		t.Fatalf("no file: %v, %v; want no policy", p, err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(bad, []byte(`{"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ImagePolicy(&config.Config{ImagePolicyFile: bad})
	if err == nil || !strings.HasPrefix(err.Error(), "imagePolicyFile: ") || !strings.Contains(err.Error(), bad) ||
		!strings.Contains(err.Error(), "default") || !strings.Contains(err.Error(), "signedBy") {
		t.Errorf("a GPG requirement: %v; want imagePolicyFile, the file, the field and the type", err)
	}
	if _, err := ImagePolicy(&config.Config{ImagePolicyFile: filepath.Join(dir, "missing.json")}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
}

// A CLI command applies its own policy file, else the one the daemon on its
// root dir runs with, else none; a daemon without one says so.
func TestCLIPolicyFile(t *testing.T) {
	root := t.TempDir()
	daemonCfg := &config.Config{RootDir: root, ImagePolicyFile: "/etc/containers/policy.json"}
	if err := recordPolicy(daemonCfg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		own, want string
	}{
		{"", "/etc/containers/policy.json"},
		{"/srv/other.json", "/srv/other.json"},
	} {
		if got, err := cliPolicyFile(&config.Config{RootDir: root, ImagePolicyFile: tc.own}); err != nil || got != tc.want {
			t.Errorf("own %q: %q, %v; want %q", tc.own, got, err, tc.want)
		}
	}
	if err := recordPolicy(&config.Config{RootDir: root}); err != nil {
		t.Fatal(err)
	}
	if got, err := cliPolicyFile(&config.Config{RootDir: root}); err != nil || got != "" {
		t.Errorf("after a daemon without a policy: %q, %v; want none", got, err)
	}
	if err := recordPolicy(&config.Config{RootDir: root}); err != nil {
		t.Errorf("no record to remove: %v", err)
	}
}
