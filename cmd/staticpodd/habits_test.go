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

// ps POD... lists only the pods named (as the manifest names them, or in
// full); -o yaml prints them as a v1 PodList; a name that is no pod fails.
func TestPsFilterAndYAML(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	out, err := runPs(t, dir, "web")
	if err != nil || !hasRow(out, "default", "web-node1", "1/1", "Running", "1", "5m") || strings.Contains(out, "etcd-node1") {
		t.Errorf("ps web: %v\n%s", err, out)
	}
	out, err = runPs(t, dir, "kube-system/etcd-node1", "-o", "yaml")
	if err != nil || !strings.Contains(out, "kind: PodList") || !strings.Contains(out, "name: etcd-node1") || strings.Contains(out, "web-node1") {
		t.Errorf("ps kube-system/etcd-node1 -o yaml: %v\n%s", err, out)
	}
	out, err = runPs(t, dir, "-o", "json", "web", "etcd-node1")
	if err != nil || !strings.Contains(out, `"name": "web-node1"`) || !strings.Contains(out, `"name": "etcd-node1"`) {
		t.Errorf("ps -o json web etcd-node1: %v\n%s", err, out)
	}
	// -o wide: the failing probes of the pods asked for, none of another's.
	out, err = runPs(t, dir, "web", "-o", "wide")
	if err != nil || !strings.Contains(out, "Failing probes:\n  default/web-node1 httpd readiness probe") {
		t.Errorf("ps web -o wide: no failing probe of web: %v\n%s", err, out)
	}
	out, err = runPs(t, dir, "etcd-node1", "-o", "wide")
	if err != nil || strings.Contains(out, "Failing probes") || strings.Contains(out, "web-node1") {
		t.Errorf("ps etcd-node1 -o wide shows web's failing probe: %v\n%s", err, out)
	}
	if _, err := runPs(t, dir, "web", "nosuch"); err == nil || err.Error() != `no pod "nosuch"` {
		t.Errorf("ps web nosuch: err %v, want no pod \"nosuch\"", err)
	}
}

// describe POD shows the pod in full against a running daemon, by the
// manifest's name.
func TestDescribeCommand(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	out, err := execute(t, testRoot(newDescribeCmd), "describe", "--run-dir", dir, "web")
	for _, want := range []string{"Name:", "web-node1", "Namespace:", "default", "Containers:", "  httpd:", "Restart Count:", "State:", "Running", "IP:", "127.0.0.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe web lacks %q: %v\n%s", want, err, out)
		}
	}
	if _, err := execute(t, testRoot(newDescribeCmd), "describe", "--run-dir", dir, "nosuch"); err == nil || err.Error() != `no pod "nosuch"` {
		t.Errorf("describe nosuch: err %v", err)
	}
}

// Shell completion (cobra's __complete, which the bash, zsh and fish
// scripts call) offers the running daemon's pods to ps, describe, logs and
// exec, and the store's image references to images rm, pin, unpin and
// export.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	for _, args := range [][]string{{"ps", "we"}, {"describe", "we"}, {"logs", "we"}, {"exec", "we"}} {
		out, _, err := run(append([]string{"__complete", "--run-dir", dir}, args...)...)
		if err != nil || !strings.Contains(out, "web\n") || !strings.Contains(out, "web-node1\n") || strings.Contains(out, "etcd") {
			t.Errorf("complete %v: %v\n%s", args, err, out)
		}
	}
	out, _, _ := run("__complete", "--run-dir", filepath.Join(dir, "none"), "describe", "")
	if !strings.HasPrefix(out, ":4\n") { // ShellCompDirectiveNoFileComp, no names
		t.Errorf("complete with no daemon: %q, want nothing and no file names", out)
	}
	root := t.TempDir()
	if _, _, err := run("images", "import", "--root-dir", root, busyboxTar(t)); err != nil {
		t.Skipf("no image to import: %v", err)
	}
	for _, sub := range []string{"rm", "pin", "unpin", "export"} {
		out, _, err := run("__complete", "--root-dir", root, "images", sub, "busy")
		if err != nil || !strings.Contains(out, "busybox:latest\n") {
			t.Errorf("complete images %s busy: %v\n%s", sub, err, out)
		}
	}
}

// busyboxTar is the test image make images builds, as the root tests take it.
func busyboxTar(t *testing.T) string {
	p := os.Getenv("STATICPODD_IMAGE")
	if p == "" {
		t.Skip("STATICPODD_IMAGE is not set (make images builds it)")
	}
	return p
}

// validate names pods <name>-<node> after the running daemon's node name (its
// --hostname-override), not the hostname; with no daemon, after the hostname.
func TestValidateUsesDaemonNodeName(t *testing.T) {
	dir, manifests := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: c, image: busybox:1.36}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	out, err := execute(t, testRoot(validateCmd), "validate", "--run-dir", dir, manifests)
	if want := "pod default/web-" + strings.ToLower(host); err != nil || !strings.Contains(out, want) {
		t.Errorf("no daemon: %v, want %q:\n%s", err, want, out)
	}
	serveDaemon(t, dir) // its node is node1
	out, err = execute(t, testRoot(validateCmd), "validate", "--run-dir", dir, manifests)
	if err != nil || !strings.Contains(out, "pod default/web-node1,") {
		t.Errorf("with the daemon of node1: %v\n%s", err, out)
	}
	out, err = execute(t, testRoot(validateCmd), "validate", "--run-dir", dir, "--hostname-override", "other", manifests)
	if err != nil || !strings.Contains(out, "pod default/web-other,") {
		t.Errorf("--hostname-override other: %v\n%s", err, out)
	}
}
