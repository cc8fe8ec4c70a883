package hostile

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// canary is a directory of files with known content, planted where an escape
// would land: absolute paths in an archive, symlink and hard link targets.
type canary struct {
	Dir    string
	Secret string // a secret-looking file; its Marker must never be shown
	Victim string // a file an escape would overwrite or link to
	Marker string
	before string
}

func plantCanary(t *testing.T) *canary {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "canary")
	c := &canary{
		Dir:    dir,
		Secret: filepath.Join(dir, "shadow"),
		Victim: filepath.Join(dir, "victim"),
		Marker: "SECRET" + testdaemon.RandHex(8),
	}
	write(t, c.Secret, fmt.Sprintf("root:$6$%s$%s:19000:0:99999:7:::\n", c.Marker, c.Marker), 0o600)
	write(t, c.Victim, "the victim's content\n", 0o644)
	write(t, filepath.Join(dir, "sub", "file"), "a file in a subdirectory\n", 0o644)
	c.before = tree(t, dir)
	return c
}

// check fails t if anything under the canary dir changed.
func (c *canary) check(t *testing.T) {
	t.Helper()
	if after := tree(t, c.Dir); after != c.before {
		t.Errorf("canary %s changed:\n%s", c.Dir, diffLines(c.before, after))
	}
}

// noSecret fails t if the canary's marker appears in any of outs, named by what.
func (c *canary) noSecret(t *testing.T, what string, out string) {
	t.Helper()
	if strings.Contains(out, c.Marker) {
		t.Errorf("%s shows the content of %s:\n%s", what, c.Secret, out)
	}
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// tree describes every entry under root, one a line: path, type and mode,
// owner, link count, size, device number, mtime, content digest or link target.
// Paths in skip (relative to root) are left out with everything under them; a
// directory in stableDirs is listed without its mtime (staging comes and goes
// inside it).
func tree(t *testing.T, root string, skip ...string) string {
	t.Helper()
	return treeStable(t, root, nil, skip...)
}

func treeStable(t *testing.T, root string, stableDirs []string, skip ...string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, s := range skip {
			// A skipped file's atomic replacement in flight, too.
			if rel == s || strings.HasPrefix(rel, "."+s+".tmp") {
				if de.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mtime := fi.ModTime().UnixNano()
		for _, s := range stableDirs {
			if rel == s {
				mtime = 0
			}
		}
		fmt.Fprintf(&b, "%q %v %d:%d n%d %d r%d m%d", rel, fi.Mode(), st.Uid, st.Gid, st.Nlink, fi.Size(), st.Rdev, mtime)
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %s", target)
		}
		if x := xattrs(p); x != "" {
			fmt.Fprintf(&b, " xattrs[%s]", x)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// xattrs lists the extended attributes of p (not following a symlink) with
// their values.
func xattrs(p string) string {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n == 0 {
		return ""
	}
	var out []string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		v := make([]byte, 64<<10)
		m, _ := unix.Lgetxattr(p, name, v)
		out = append(out, fmt.Sprintf("%s=%q", name, v[:max(m, 0)]))
	}
	return strings.Join(out, " ")
}

// devicesUnder lists the device nodes under root, leaving out skip.
func devicesUnder(t *testing.T, root string, skip string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		if de.Type()&fs.ModeDevice != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// caseName puts a case the product does not hold yet under not-held/, so that
// its failure is seen for what it is.
func caseName(name, notHeld string) string {
	if notHeld != "" {
		return "not-held/" + name
	}
	return name
}

// checkNotHeld, deferred in a case marked not held, says why it is expected to
// fail, or that it holds now and the mark must go.
func checkNotHeld(t *testing.T, notHeld string) {
	if notHeld == "" {
		return
	}
	if t.Failed() {
		t.Logf("NOT HELD (known): %s", notHeld)
		return
	}
	if !t.Skipped() {
		t.Errorf("this case holds now: move it out of not-held/ (it was marked: %s)", notHeld)
	}
}

// diffLines shows how two tree descriptions differ: lines only in before (-)
// and lines only in after (+).
func diffLines(before, after string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	b, a := in(before), in(after)
	var out strings.Builder
	for _, l := range strings.Split(before, "\n") {
		if !a[l] {
			out.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(after, "\n") {
		if !b[l] {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}
