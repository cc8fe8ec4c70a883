package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestImportFormats(t *testing.T) {
	testroot.Require(t)
	img := testImage(t)
	wantID, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]v1.Image{"example.com/team/app:v1": img}
	for _, format := range []string{"docker-archive", "oci-archive", "oci-dir"} {
		for _, comp := range []string{"none", "gzip", "zstd"} {
			if format == "oci-dir" && comp != "none" {
				continue
			}
			t.Run(format+"/"+comp, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "image.archive") // no telling suffix
				switch format {
				case "docker-archive":
					writeDockerArchive(t, p, refs)
				case "oci-archive":
					writeOCIArchive(t, p, refs)
				case "oci-dir":
					writeLayout(t, p, refs)
				}
				compress(t, p, comp)
				s := openStore(t)
				imgs, err := s.Import(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				if len(imgs) != 1 || imgs[0].ID != wantID.String() {
					t.Fatalf("imported %+v, want one image %s", imgs, wantID)
				}
				got, err := s.Get("example.com/team/app:v1")
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Config.Cmd, []string{"sh"}) || !got.Created.Equal(fixtureTime) {
					t.Errorf("config = %+v created %v, want Cmd [sh] created %v", got.Config, got.Created, fixtureTime)
				}
				var wantLayers []string
				for _, d := range cfg.RootFS.DiffIDs {
					wantLayers = append(wantLayers, d.String())
				}
				if !slices.Equal(got.Layers, wantLayers) {
					t.Errorf("layers = %v, want %v", got.Layers, wantLayers)
				}
				if got.Size <= 0 {
					t.Errorf("size = %d, want > 0", got.Size)
				}
				checkBaseLayer(t, s.layerDir(got.Layers[0]))
				checkTopLayer(t, s.layerDir(got.Layers[1]))
			})
		}
	}
}

func checkBaseLayer(t *testing.T, dir string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "bin/tool"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 1000 || st.Gid != 1000 || st.Mode&0o7777 != 0o4755 {
		t.Errorf("bin/tool: uid %d gid %d mode %o, want 1000 1000 4755", st.Uid, st.Gid, st.Mode&0o7777)
	}
	if got := st.Mtim.Sec; got != fixtureTime.Unix() {
		t.Errorf("bin/tool mtime %d, want %d", got, fixtureTime.Unix())
	}
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(filepath.Join(dir, "bin/tool"), "user.origin", buf)
	if err != nil || string(buf[:n]) != "fixture" {
		t.Errorf("bin/tool xattr user.origin = %q, %v; want fixture", buf[:n], err)
	}
	var link unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "bin/tool-link"), &link); err != nil || link.Ino != st.Ino {
		t.Errorf("bin/tool-link is not a hard link of bin/tool (%v)", err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || target != "tool" {
		t.Errorf("bin/sh -> %q, %v; want tool", target, err)
	}
	if err := unix.Lstat(filepath.Join(dir, "dev/null"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		t.Errorf("dev/null: mode %o rdev %d (%v), want char 1:3", st.Mode, st.Rdev, err)
	}
	if err := unix.Lstat(filepath.Join(dir, "tmp"), &st); err != nil || st.Mode&0o7777 != 0o1777 {
		t.Errorf("tmp mode %o (%v), want 1777", st.Mode&0o7777, err)
	}
	if err := unix.Lstat(filepath.Join(dir, "etc"), &st); err != nil || st.Mtim.Sec != fixtureTime.Unix() {
		t.Errorf("etc mtime %d (%v), want %d", st.Mtim.Sec, err, fixtureTime.Unix())
	}
}

func checkTopLayer(t *testing.T, dir string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "gone.txt"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("gone.txt is not a 0/0 whiteout: mode %o rdev %d (%v)", st.Mode, st.Rdev, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".wh.gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".wh.gone.txt left in the layer: %v", err)
	}
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(filepath.Join(dir, "opaque"), "trusted.overlay.opaque", buf)
	if err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque dir xattr = %q, %v; want y", buf[:n], err)
	}
}

func TestImportMultiImageArchives(t *testing.T) {
	testroot.Require(t)
	a := testImage(t)
	b := testImage(t, baseEntries) // shares the base layer with a
	refs := map[string]v1.Image{"app:one": a, "app:two": b}
	for _, format := range []string{"docker-archive", "oci-archive"} {
		t.Run(format, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "images.tar")
			if format == "docker-archive" {
				writeDockerArchive(t, p, refs)
			} else {
				writeOCIArchive(t, p, refs)
			}
			s := openStore(t)
			if _, err := s.Import(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			for _, ref := range []string{"docker.io/library/app:one", "app:two"} {
				if _, err := s.Get(ref); err != nil {
					t.Errorf("Get(%s): %v", ref, err)
				}
			}
			if n := countDir(t, s.layersDir()); n != 2 {
				t.Errorf("%d layer dirs, want 2 (the base layer once)", n)
			}
		})
	}
}

func countDir(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestReimportUnpacksNothing(t *testing.T) {
	testroot.Require(t)
	p := filepath.Join(t.TempDir(), "app.tar.gz")
	writeDockerArchive(t, p, map[string]v1.Image{"app:v1": testImage(t)})
	compress(t, p, "gzip")
	s := openStore(t)
	first, err := s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(s.layerDir(first[0].Layers[0]), "etc", "passwd")
	before, err := os.Stat(marker)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(first, again, func(a, b Image) bool { return a.ID == b.ID && slices.Equal(a.Refs, b.Refs) && a.Size == b.Size }) {
		t.Errorf("re-import gave %+v, first gave %+v", again, first)
	}
	after, err := os.Stat(marker)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("re-import unpacked the layer again (new inode)")
	}
}

func TestImportRefusesBrokenArchives(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	writeDockerArchive(t, good, map[string]v1.Image{"good:v1": testImage(t)})
	other := filepath.Join(dir, "other.tar")
	writeDockerArchive(t, other, map[string]v1.Image{"other:v1": testImage(t, baseEntries, []entry{{name: "big", body: noise(256 << 10)}})})
	raw, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}

	broken := map[string][]byte{
		"truncated.tar": raw[:len(raw)/2],
		"flipped.tar":   flipLayerByte(t, raw),
		"empty.tar":     nil,
		"notatar":       []byte("hello, this is not an archive at all, nothing to see here\n"),
	}
	var gz []byte
	{
		p := filepath.Join(dir, "whole.gz")
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		compress(t, p, "gzip")
		if gz, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	broken["truncated.tar.gz"] = gz[:len(gz)*2/3]

	s := openStore(t)
	if _, err := s.Import(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	want := treeDigest(t, s.Root())
	for fname, b := range broken {
		t.Run(fname, func(t *testing.T) {
			p := filepath.Join(dir, fname)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := s.Import(context.Background(), p)
			if err == nil {
				t.Fatal("import succeeded")
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
			t.Logf("error: %v", err)
			if got := treeDigest(t, s.Root()); got != want {
				t.Errorf("store changed:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// noise is n incompressible bytes, the same each run.
func noise(n int) string {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// flipLayerByte changes one byte in the middle of the largest blob of the tar: the
// layer no other archive in the test has.
func flipLayerByte(t *testing.T, raw []byte) []byte {
	t.Helper()
	r := bytes.NewReader(raw)
	tr := tar.NewReader(r)
	var off, size int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Size > size {
			off, size = r.Size()-int64(r.Len()), hdr.Size
		}
	}
	out := slices.Clone(raw)
	out[off+size/2] ^= 0xff
	return out
}

// treeDigest describes every file under root: path, type, mode, owner, size, mtime,
// content and link target; the tmp/ dir's own mtime aside (staging comes and goes),
// and the paths in skip (relative to root) left out.
func treeDigest(t *testing.T, root string, skip ...string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(skip, rel) {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		mtime := fi.ModTime().UnixNano()
		if rel == "tmp" {
			mtime = 0
		}
		fmt.Fprintf(&b, "%s %v %d:%d %d %d", rel, fi.Mode(), st.Uid, st.Gid, fi.Size(), mtime)
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %s", target)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestConcurrentImports runs imports of the same and of other archives at once, as
// the daemon's import folder and a CLI `images import` may: every one succeeds and
// the store ends with each layer once.
func TestConcurrentImports(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar.zst")
	writeDockerArchive(t, a, map[string]v1.Image{"app:a": testImage(t)})
	writeDockerArchive(t, b, map[string]v1.Image{"app:b": testImage(t, baseEntries)})
	compress(t, b, "zstd")
	s := openStore(t)
	errs := make(chan error, 6)
	for _, p := range []string{a, b, a, b, a, b} {
		go func() {
			other, err := Open(s.Root(), discardLogger()) // as another process would
			if err == nil {
				_, err = other.Import(context.Background(), p)
			}
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	imgs, err := s.List()
	if err != nil || len(imgs) != 2 {
		t.Fatalf("List = %+v, %v; want 2 images", imgs, err)
	}
	if n := countDir(t, s.layersDir()); n != 2 {
		t.Errorf("%d layer dirs, want 2", n)
	}
	if n := countDir(t, s.tmpDir()); n != 0 {
		t.Errorf("%d staging dirs left", n)
	}
}
