package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An image tagged :latest (or untagged) gets imagePullPolicy Always, as under
// the kubelet: validate warns that a node without the registry cannot start
// it, and names the fix. An explicit IfNotPresent, or a pinned tag, does not
// warn.
func TestValidateWarnsPullAlways(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"latest.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: c, image: nginx}\n",
		"ifnot.yaml":  "apiVersion: v1\nkind: Pod\nmetadata: {name: ifnot}\nspec:\n  containers:\n  - {name: c, image: nginx:latest, imagePullPolicy: IfNotPresent}\n",
		"tagged.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: tagged}\nspec:\n  containers:\n  - {name: c, image: nginx:1.27}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", dir)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	want := "warning: " + dir + `/latest.yaml: spec.containers[0].imagePullPolicy: Always (the default for an image tagged :latest or untagged): "nginx" is pulled at every start`
	if !strings.Contains(out, want) || !strings.Contains(out, "set imagePullPolicy: IfNotPresent") {
		t.Errorf("validate output lacks the pull policy warning %q:\n%s", want, out)
	}
	if strings.Count(out, "is pulled at every start") != 1 {
		t.Errorf("want one warning, for latest.yaml only:\n%s", out)
	}
}
