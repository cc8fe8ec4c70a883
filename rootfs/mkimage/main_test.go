package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/rootfs/busybox"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{`["sh","-c","echo a,b"]`, []string{"sh", "-c", "echo a,b"}},
		{"httpd,-f,-p,8080", []string{"httpd", "-f", "-p", "8080"}},
	}
	for _, tt := range tests {
		got, err := parseList(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseList(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := parseList(`["sh"`); err == nil {
		t.Error("parseList accepted a broken JSON array")
	}
}

// TestImageRuns builds the image in both formats and every compression, imports it
// into a real store, and runs busybox from the mounted rootfs.
func TestImageRuns(t *testing.T) {
	testroot.Require(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("needs busybox-static: %v", err)
	}
	dir := t.TempDir()
	s, err := image.Open(filepath.Join(dir, "images"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, format := range []string{"docker", "oci"} {
		for _, comp := range []string{"none", "gzip", "zstd"} {
			o := options{busybox: "/bin/busybox", refs: []string{"busybox", "example.com/web:v1"}, format: format, compress: comp,
				cmd: []string{"sh"}, env: []string{"PATH=/bin"}, out: filepath.Join(dir, format+"-"+comp+".tar")}
			if err := build(o); err != nil {
				t.Fatal(err)
			}
			imgs, err := s.Import(context.Background(), o.out)
			if err != nil {
				t.Fatal(err)
			}
			if len(imgs) != 1 || !slices.Equal(imgs[0].Refs, []string{"docker.io/library/busybox:latest", "example.com/web:v1"}) {
				t.Fatalf("%s/%s imported %+v", format, comp, imgs)
			}
			ids = append(ids, imgs[0].ID)
		}
	}
	if len(slices.Compact(slices.Clone(ids))) != 1 {
		t.Errorf("image IDs differ between formats and builds: %v", ids)
	}

	rootfs, img, err := s.Prepare("mkimage-test", "busybox")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("mkimage-test")
	if !slices.Equal(img.Config.Cmd, []string{"sh"}) {
		t.Errorf("Cmd = %q, want [sh]", img.Config.Cmd)
	}
	for _, a := range busybox.RequiredApplets {
		if target, err := os.Readlink(filepath.Join(rootfs, "bin", a)); err != nil || target != "busybox" {
			t.Errorf("bin/%s -> %q, %v; want busybox", a, target, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp: %v %v, want 1777", fi.Mode(), err)
	}
	cmd := exec.Command("/bin/sh", "-c", "cat /www/index.html; id -un; grep nobody /etc/group")
	cmd.Env = []string{"PATH=/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run in rootfs: %v: %s", err, out)
	}
	if want := "hello from staticpodd\nroot\nnobody:x:65534:\n"; string(out) != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// -stop-signal reaches the image config the store reads.
func TestImageStopSignal(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	s, err := image.Open(filepath.Join(dir, "images"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	o := options{busybox: "/bin/busybox", refs: []string{"example.com/quits:v1"}, format: "docker", compress: "none",
		cmd: []string{"sh"}, stopSignal: "SIGUSR1", out: filepath.Join(dir, "quits.tar")}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.Import(context.Background(), o.out)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || imgs[0].Config.StopSignal != "SIGUSR1" {
		t.Fatalf("imported %+v, want StopSignal SIGUSR1", imgs)
	}
}

func TestParseAdds(t *testing.T) {
	got, err := parseAdds([]string{"bin/etcd:/usr/local/bin/etcd", "a:/b:c"})
	if want := []file{{"bin/etcd", "usr/local/bin/etcd"}, {"a", "b:c"}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("parseAdds = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"etcd", ":/x", "etcd:", "etcd:usr/bin/etcd", "etcd:/", "etcd:/usr/../etc/passwd", "etcd:/usr/bin/"} {
		if got, err := parseAdds([]string{bad}); err == nil {
			t.Errorf("parseAdds(%q) = %q, want an error", bad, got)
		}
	}
}

// -add puts a host file, its mode and the directories above it into the image:
// the file runs from the mounted rootfs.
func TestImageAdd(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	s, err := image.Open(filepath.Join(dir, "images"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "tool")
	body, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("needs busybox-static: %v", err)
	}
	if err := os.WriteFile(tool, body, 0o750); err != nil {
		t.Fatal(err)
	}
	// busybox runs the applet its name says.
	files, err := parseAdds([]string{tool + ":/usr/local/bin/echo"})
	if err != nil {
		t.Fatal(err)
	}
	o := options{busybox: "/bin/busybox", refs: []string{"example.com/tool:v1"}, format: "docker", compress: "none",
		cmd: []string{"echo"}, files: files, out: filepath.Join(dir, "tool.tar")}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(context.Background(), o.out); err != nil {
		t.Fatal(err)
	}
	rootfs, _, err := s.Prepare("mkimage-add-test", "example.com/tool:v1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("mkimage-add-test")
	for p, mode := range map[string]os.FileMode{"usr/local": os.ModeDir | 0o755, "usr/local/bin": os.ModeDir | 0o755, "usr/local/bin/echo": 0o750} {
		if fi, err := os.Stat(filepath.Join(rootfs, p)); err != nil || fi.Mode() != mode {
			t.Errorf("/%s: %v, %v; want %v", p, fi.Mode(), err, mode)
		}
	}
	cmd := exec.Command("/usr/local/bin/echo", "added")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "added\n" {
		t.Errorf("run the added file: %q, %v", out, err)
	}

	o.files = []file{{tool, "usr/bin"}}
	if err := build(o); err == nil {
		t.Error("-add onto a directory of the image was accepted")
	}
}
