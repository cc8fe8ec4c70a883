package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func validateCmd(*globalOptions) *cobra.Command { return newValidateCmd() }

const seedPod = `apiVersion: v1
kind: Pod
metadata:
  name: static-pod
  lables:
    app: nginx
spec:
  containers:
    - name: test-static
      image: nginx:latest
      ports:
        - containerPort: 81
          name: http-server
`

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"static-pod.yaml":     seedPod,
		"static-pod.yaml.bak": seedPod,
		".hidden.yaml":        "junk",
		"broken.yaml":         "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers:\n  - name: c\n",
		"copy.yaml":           seedPod,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", dir)
	if err == nil {
		t.Errorf("validate passed a broken directory:\n%s", out)
	}
	for _, want := range []string{
		"warning: " + dir + "/copy.yaml: unknown field \"metadata.lables\", ignored",
		"warning: " + dir + "/static-pod.yaml.bak: looks like a backup",
		"error: " + dir + "/broken.yaml: spec.containers[0].image: required",
		"ok: " + dir + "/copy.yaml: pod default/static-pod-node1",
		"error: " + dir + "/static-pod.yaml: pod default/static-pod-node1 is also defined by " + dir + "/copy.yaml",
		"3 file(s), 1 pod(s), 2 error(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ".hidden.yaml") {
		t.Errorf("dot-file mentioned:\n%s", out)
	}

	good := filepath.Join(dir, "copy.yaml")
	out, err = execute(t, testRoot(validateCmd), "validate", good)
	if err != nil || !strings.Contains(out, "1 file(s), 1 pod(s), 0 error(s)") {
		t.Errorf("validate %s: %v\n%s", good, err, out)
	}
	if _, err := execute(t, testRoot(validateCmd), "validate", filepath.Join(dir, "nope.yaml")); err == nil {
		t.Error("validate of a missing file passed")
	}
}
