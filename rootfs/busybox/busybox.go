// Package busybox lays out the root filesystem of staticpodd's test image
// from Debian's busybox-static binary: one layout for the image tarball
// (rootfs/mkimage), the oci tests' overlay lower directory and the
// benchmark's runc bundles, so that every container a test runs sees the
// same tree.
package busybox

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// RequiredApplets are always linked; other applets the binary lists are
// linked too.
var RequiredApplets = []string{"sh", "ls", "cat", "echo", "sleep", "httpd", "wget", "true", "false",
	"env", "id", "hostname", "ps", "mount", "grep", "touch", "date", "kill"}

// Entry is one file of the tree.
type Entry struct {
	Name string // relative: "bin/sh"
	Type byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	Mode int64
	Body []byte // a regular file's content
	Link string // a symlink's target
}

// Applets are the applet names the busybox binary at path reports, sorted,
// with RequiredApplets; RequiredApplets alone if it cannot be run here
// (another architecture).
func Applets(path string) []string {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return slices.Clone(RequiredApplets)
	}
	list := strings.Fields(string(out))
	for _, a := range RequiredApplets {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	slices.Sort(list)
	return slices.Compact(list)
}

// Base is the tree but the applet links, in its order: the directories,
// bin/busybox (bin, busybox's bytes), users and groups (root and nobody) and
// /www/index.html.
func Base(bin []byte) []Entry {
	dir := func(name string, mode int64) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: mode} }
	file := func(name string, mode int64, body string) Entry {
		return Entry{Name: name, Type: tar.TypeReg, Mode: mode, Body: []byte(body)}
	}
	return []Entry{
		dir("bin", 0o755), {Name: "bin/busybox", Type: tar.TypeReg, Mode: 0o755, Body: bin},
		dir("dev", 0o755), dir("etc", 0o755), dir("proc", 0o555), dir("root", 0o700), dir("sys", 0o555),
		dir("tmp", 0o1777), dir("usr", 0o755), dir("usr/bin", 0o755), dir("var", 0o755), dir("www", 0o755),
		file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
		file("etc/group", 0o644, "root:x:0:\nnobody:x:65534:\n"),
		file("www/index.html", 0o644, "hello from staticpodd\n"),
	}
}

// Links are the symlinks bin/<applet> -> busybox of applets, busybox itself
// and names with a slash left out.
func Links(applets []string) []Entry {
	var out []Entry
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		out = append(out, Entry{Name: "bin/" + a, Type: tar.TypeSymlink, Mode: 0o777, Link: "busybox"})
	}
	return out
}

// WriteDir writes the whole tree of the busybox binary at path into dir,
// which must be empty or missing: the image's root filesystem as a
// directory.
func WriteDir(dir, path string) error {
	bin, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read busybox (apt-get install busybox-static): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, e := range append(Base(bin), Links(Applets(path))...) {
		p := filepath.Join(dir, filepath.FromSlash(e.Name))
		mode := os.FileMode(e.Mode & 0o777)
		if e.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch e.Type {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o700); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, os.Chmod(p, mode)) // past the umask
		case tar.TypeReg:
			if err := os.WriteFile(p, e.Body, 0o600); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, os.Chmod(p, mode))
		case tar.TypeSymlink:
			errs = append(errs, os.Symlink(e.Link, p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("write the busybox tree into %s: %w", dir, err)
	}
	return nil
}
