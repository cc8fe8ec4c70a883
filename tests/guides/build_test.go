package guides

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildRefusesMistakes: build.sh stops on an operator's mistake before it
// builds anything, saying what is wrong.
func TestBuildRefusesMistakes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deb := write("staticpodd.deb", "not built by this test: build.sh stops before it reads it")
	manifest := write("m/web.yaml", "apiVersion: v1\nkind: Pod\n")
	other := write("other/web.yaml", "apiVersion: v1\nkind: Pod\n")
	image := write("i/web.tar", "")
	empty := filepath.Join(dir, "empty")
	notRoot := filepath.Join(dir, "notroot")
	for _, d := range []string{empty, notRoot} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out.img")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--deb", deb, "--bogus", "-o", out}, "unknown option --bogus"},
		{[]string{"--manifest", manifest, "-o", out}, "no package: give the staticpodd .deb with --deb"},
		{[]string{"--deb", deb}, "no output image: give -o OUT_IMG"},
		{[]string{"--deb", deb, "-o"}, "-o needs a value"},
		{[]string{"--deb", filepath.Join(dir, "nope.deb"), "-o", out}, "nope.deb: no such file"},
		{[]string{"--deb", deb, "--manifests", empty, "-o", out}, "empty: no manifest (*.yaml, *.yml, *.json) in it"},
		{[]string{"--deb", deb, "--images", empty, "-o", out}, "empty: no image archive in it"},
		{[]string{"--deb", deb, "--manifests", filepath.Join(dir, "m"), "--manifest", other, "-o", out}, "two files named web.yaml"},
		{[]string{"--deb", deb, "--image", image, "--hostname", "Edge_1", "-o", out}, "--hostname Edge_1: want a DNS label"},
		{[]string{"--deb", deb, "--rootfs", notRoot, "-o", out}, "notroot: no systemd in it"},
		{[]string{"--deb", deb, "--rootfs", deb, "-o", out}, "staticpodd.deb: not a directory"},
		{[]string{"DEB", "IMAGE_TAR", "MANIFEST"}, "usage: build.sh"},
	} {
		cmd := exec.Command("../../rootfs/appliance/build.sh", c.args...)
		b, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("build.sh %s: exit %v, want status 2; output:\n%s", strings.Join(c.args, " "), err, b)
			continue
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("build.sh %s: output does not say %q:\n%s", strings.Join(c.args, " "), c.want, b)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("build.sh %s wrote %s", strings.Join(c.args, " "), out)
		}
	}
}
