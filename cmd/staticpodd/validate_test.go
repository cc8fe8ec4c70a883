package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/source"
)

func validateCmd(o *globalOptions) *cobra.Command { return newValidateCmd(o) }

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
		"warning: " + dir + "/copy.yaml: metadata.lables: unknown field, ignored",
		"warning: " + dir + "/static-pod.yaml.bak: looks like a backup",
		"error: " + dir + "/broken.yaml: spec.containers[0].image: Required value",
		"ok: " + dir + "/copy.yaml: pod default/static-pod-node1",
		"error: " + dir + "/static-pod.yaml: metadata.name: pod default/static-pod-node1 is also defined by " + dir + "/copy.yaml",
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

// validate prints the UID the daemon's file source gives the pod, whether the
// path was typed relative or absolute; the daemon gets the absolute path from
// its config.
func TestValidateUIDMatchesFileSource(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "static-pod.yaml"), []byte(seedPod), 0o644); err != nil {
		t.Fatal(err)
	}
	uidRe := regexp.MustCompile(`pod default/static-pod-node1, uid (\S+)`)
	validateUID := func(path string) string {
		t.Helper()
		out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", path)
		m := uidRe.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("validate %s: %v\n%s", path, err, out)
		}
		return m[1]
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	updates := make(chan source.Update, 1)
	src := source.NewFile(dir, "node1", time.Hour, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, updates) }()
	u := <-updates
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(u.Pods) != 1 {
		t.Fatalf("file source: pods %v, problems %v", u.Pods, u.Problems)
	}
	daemonUID := string(u.Pods[0].UID)

	abs := validateUID(filepath.Join(dir, "static-pod.yaml"))
	t.Chdir(dir)
	for _, path := range []string{"static-pod.yaml", "./static-pod.yaml", "."} {
		if got := validateUID(path); got != daemonUID {
			t.Errorf("validate %s: uid %s, the file source's is %s", path, got, daemonUID)
		}
	}
	if abs != daemonUID {
		t.Errorf("validate by absolute path: uid %s, the file source's is %s", abs, daemonUID)
	}
}

// The example: a quantity that does not parse and a misspelt field.
// Both are reported at once, the error naming the field and the value, in
// text and in JSON, one object per file with the pod's name and UID.
func TestValidateReportsAllAndJSON(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yaml")
	body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: busybox\n    comand: [httpd]\n    resources:\n      limits: {memory: 32Megs}\n"
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(seedPod), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", bad)
	if err == nil {
		t.Errorf("validate passed %s", bad)
	}
	for _, want := range []string{
		"warning: " + bad + ": spec.containers[0].comand: unknown field, ignored",
		"error: " + bad + `: spec.containers[0].resources.limits[memory]: Invalid value: "32Megs": quantities must match`,
		"1 file(s), 0 pod(s), 1 error(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", "-o", "json", dir)
	if err == nil {
		t.Errorf("validate -o json passed %s", dir)
	}
	var got []checked
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(got) != 2 || got[0].Origin != good || got[1].Origin != bad {
		t.Fatalf("-o json entries:\n%s", out)
	}
	g, b := got[0], got[1]
	if g.Source != "file" || len(g.Pods) != 1 || g.Pods[0].Name != "static-pod-node1" || g.Pods[0].Namespace != "default" ||
		len(g.Pods[0].UID) != 32 || len(g.Errors) != 0 || len(g.Warnings) != 2 || g.Warnings[0].Field != "metadata.lables" ||
		g.Warnings[1].Field != "spec.containers[0].imagePullPolicy" { // nginx:latest: Always
		t.Errorf("good entry: %+v", g)
	}
	if len(b.Pods) != 0 || len(b.Errors) != 1 || b.Errors[0].Field != "spec.containers[0].resources.limits[memory]" ||
		b.Errors[0].Value != "32Megs" || !strings.Contains(b.Errors[0].Reason, "quantities must match") ||
		len(b.Warnings) != 1 || b.Warnings[0].Field != "spec.containers[0].comand" {
		t.Errorf("bad entry: %+v", b)
	}
	if !strings.Contains(out, `"warnings": []`) && !strings.Contains(out, `"errors": []`) {
		t.Errorf("empty lists are not [] in:\n%s", out)
	}
}

// validate checks the objects of the files given together: one defined
// twice, a Secret's credentials read from --credentials-directory, or said
// not checked without one.
func TestValidateObjects(t *testing.T) {
	dir, creds := t.TempDir(), t.TempDir()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n"
	files := map[string]string{
		"a.yaml":    cm,
		"b.yaml":    cm,
		"keys.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: keys\n  annotations: {staticpodd.io/credentials: \"tls.key=apiserver.key\"}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", dir)
	if err == nil {
		t.Errorf("validate passed a ConfigMap defined twice:\n%s", out)
	}
	for _, want := range []string{
		"ok: " + dir + "/a.yaml: ConfigMap default/cfg",
		"error: " + dir + "/b.yaml: metadata.name: ConfigMap default/cfg is defined both in " + dir + "/a.yaml and in " + dir + "/b.yaml",
		"warning: " + dir + "/keys.yaml: metadata.annotations[staticpodd.io/credentials]: Secret default/keys: credentials not checked: no credentials directory given",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	os.Remove(filepath.Join(dir, "b.yaml"))
	out, err = execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", "--credentials-directory", creds, dir)
	want := "error: " + dir + `/keys.yaml: metadata.annotations[staticpodd.io/credentials]: Secret default/keys: key "tls.key": credential "apiserver.key": ` + creds + "/apiserver.key: no such file or directory"
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("a missing credential: %v\n%s\nwant %s", err, out, want)
	}
	if err := os.WriteFile(filepath.Join(creds, "apiserver.key"), []byte("KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", "--credentials-directory", creds, dir); err != nil || strings.Contains(out, "KEY") {
		t.Errorf("with the credential: %v\n%s", err, out)
	}
}
