//go:build linux && cgo

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Of iptables' failures with status 1, only "no such rule" means the rule
// is not there: one that cannot load a match is an error, so that a -D that
// failed is not taken for done (the rule would stay for ever).
func TestMasqRuleStatusOne(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		missing    bool
	}{
		{"no such rule", "iptables: Bad rule (does a matching rule exist in that chain?).", true},
		{"no comment match", "iptables v1.8.9 (nf_tables): Couldn't load match comment: No such file or directory", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := "#!/bin/sh\necho \"" + tc.says + "\" >&2\nexit 1\n"
			if err := os.WriteFile(filepath.Join(dir, "iptables"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir)
			m := masqRule{Bridge: "spdt0", Subnet: "10.97.0.0/24"}
			err := m.remove(context.Background())
			if tc.missing && err != nil {
				t.Errorf("remove of a rule that is not there: %v, want done", err)
			}
			if !tc.missing && (err == nil || !strings.Contains(err.Error(), "Couldn't load match")) {
				t.Errorf("remove with iptables failing: %v, want its error", err)
			}
		})
	}
}
