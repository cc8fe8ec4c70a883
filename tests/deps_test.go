package tests

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestImportFences keeps the layout's promises (DESIGN.md): agent/ never sees
// libcontainer, oci/ never sees k8s.io, only agent/mirror may import client-go,
// and agent/podspec, which both sides import, stays small.
func TestImportFences(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Deps", "../agent/...", "../oci/...", "../sysd/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/staticpodd/staticpodd/"
	type pkg struct {
		ImportPath string
		Deps       []string
	}
	dec := json.NewDecoder(out)
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.ImportPath, mod) {
			continue
		}
		checked++
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, d := range p.Deps {
			switch {
			case strings.HasPrefix(rel, "agent") && strings.HasPrefix(d, "github.com/opencontainers/runc"):
				t.Errorf("%s imports %s: agent/ must never see libcontainer", rel, d)
			case strings.HasPrefix(rel, "agent") && strings.HasPrefix(d, mod+"oci"):
				t.Errorf("%s imports %s: agent/ talks to oci/ only through agent.Runtime", rel, d)
			case strings.HasPrefix(rel, "oci") && strings.HasPrefix(d, "k8s.io/"):
				t.Errorf("%s imports %s: oci/ never sees k8s.io types, only agent/podspec", rel, d)
			case strings.HasPrefix(rel, "oci") && strings.HasPrefix(d, mod+"agent") && d != mod+"agent/podspec":
				t.Errorf("%s imports %s: oci/ may only import agent/podspec from agent/", rel, d)
			case strings.HasPrefix(d, "k8s.io/client-go") && !strings.HasPrefix(rel, "agent/mirror"):
				t.Errorf("%s imports %s: only agent/mirror may import client-go", rel, d)
			case strings.HasPrefix(rel, "sysd") && (strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "github.com/opencontainers/")):
				t.Errorf("%s imports %s: sysd/ knows only systemd", rel, d)
			case rel == "agent/podspec" && strings.Contains(strings.Split(d, "/")[0], ".") &&
				d != "github.com/google/go-containerregistry/pkg/name" && d != "github.com/opencontainers/go-digest":
				t.Errorf("%s imports %s: podspec needs only the standard library and the image reference parser", rel, d)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if checked == 0 {
		t.Fatal("go list returned none of our packages")
	}
}
