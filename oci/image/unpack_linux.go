package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxTrailer bounds what a layer may hold after its tar's end-of-archive blocks.
const maxTrailer = 1 << 20

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	xattrPAXPrefix = "SCHILY.xattr."
)

// unpack writes the layer tar r into dir as an overlay lowerdir, and returns the
// tar's size and digest. OCI whiteouts become what overlayfs reads: a .wh.NAME file
// a 0/0 character device NAME, a .wh..wh..opq file the trusted.overlay.opaque=y
// xattr on its directory. Ownership, modes (setuid included), mtimes, xattrs, hard
// links, symlinks and device nodes are kept. An entry whose path leaves dir, by ".."
// or through a symlink, or that names dir itself, is refused, and so is a whiteout
// that hides nothing a layer can hold (see whiteout).
//
// What it writes is charged to sp before it is written.
func unpack(ctx context.Context, r io.Reader, dir string, sp *space) (int64, string, error) {
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(r, h)}
	u := &unpacker{root: dir, dirs: map[string]bool{"": true}, dirTimes: map[string]dirTime{}, buf: make([]byte, 1<<20), space: sp}
	tr := tar.NewReader(cr)
	for {
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, "", fmt.Errorf("read tar: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return 0, "", fmt.Errorf("entry %s: %w", hdr.Name, err)
		}
	}
	// The digest covers the tar's end blocks and any padding after them: tar
	// pads to its record size, 10 KiB, and nothing needs more than maxTrailer.
	// Past that it is a decompression bomb that would only cost time.
	n, err := io.CopyBuffer(io.Discard, io.LimitReader(cr, maxTrailer+1), u.buf)
	if err != nil {
		return 0, "", fmt.Errorf("read tar: %w", err)
	}
	if n > maxTrailer {
		return 0, "", fmt.Errorf("read tar: more than %d bytes after the end of the archive", maxTrailer)
	}
	if err := u.finish(); err != nil {
		return 0, "", err
	}
	return cr.n, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type unpacker struct {
	root string
	// dirs holds relative paths known to be real directories (not symlinks) in root.
	dirs map[string]bool
	// dirTimes, by relative path, are applied last: writing into a directory
	// changes its mtime. Only directories still in dirs have an entry.
	dirTimes map[string]dirTime
	buf      []byte
	space    *space
}

type dirTime struct {
	atime, mtime time.Time
}

// relPath turns a tar entry name into a path relative to the root, refusing names
// that climb out of it. "" is the root itself.
func relPath(name string) (string, error) {
	clean := path.Clean(strings.TrimLeft(name, "/"))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q escapes the layer root", name)
	}
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// parents makes sure every parent of rel is a real directory inside the root,
// creating missing ones, and refuses a parent that is a symlink or a file.
func (u *unpacker) parents(rel string, create bool) error {
	dir := path.Dir(rel)
	if dir == "." || u.dirs[dir] {
		return nil
	}
	if err := u.parents(dir, create); err != nil {
		return err
	}
	full := filepath.Join(u.root, dir)
	fi, err := os.Lstat(full)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		return fmt.Errorf("parent %s is not a directory: refusing to write through it", dir)
	case errors.Is(err, os.ErrNotExist) && create:
		if err := u.space.take(blockSize); err != nil {
			return err
		}
		if err := u.space.takeInode(); err != nil {
			return err
		}
		if err := os.Mkdir(full, 0o755); err != nil {
			return err
		}
	default:
		return err
	}
	u.dirs[dir] = true
	return nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := relPath(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "" && hdr.Typeflag != tar.TypeDir && hdr.Typeflag != tar.TypeXGlobalHeader {
		return errors.New("names the layer root, which only a directory entry may")
	}
	kind, err := whiteout(rel, hdr)
	switch {
	case err != nil:
		return err
	case kind == whiteoutNone:
	case kind == whiteoutAUFS:
		return nil // aufs bookkeeping (.wh..wh.plnk…), meaningless to overlayfs
	case kind == whiteoutDir:
		if err := u.parents(rel, true); err != nil {
			return err
		}
		return unix.Lsetxattr(filepath.Join(u.root, path.Dir(rel)), "trusted.overlay.opaque", []byte("y"), 0)
	case kind == whiteoutFile:
		if err := u.parents(rel, true); err != nil {
			return err
		}
		rel = path.Join(path.Dir(rel), strings.TrimPrefix(path.Base(rel), whiteoutPrefix))
		if err := u.clear(rel, false); err != nil {
			return err
		}
		if err := u.space.takeInode(); err != nil {
			return err
		}
		target := filepath.Join(u.root, rel)
		if err := unix.Mknod(target, unix.S_IFCHR, 0); err != nil {
			return err
		}
		return os.Lchown(target, hdr.Uid, hdr.Gid)
	}
	if err := u.parents(rel, true); err != nil {
		return err
	}

	target := filepath.Join(u.root, rel)
	if err := u.clear(rel, hdr.Typeflag == tar.TypeDir); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if err := u.space.takeInode(); err != nil {
			return err
		}
	case tar.TypeDir:
		if rel != "" && !u.dirs[rel] {
			if err := u.space.takeInode(); err != nil {
				return err
			}
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if rel != "" && !u.dirs[rel] {
			if err := u.space.take(blockSize); err != nil {
				return err
			}
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			u.dirs[rel] = true
		}
	case tar.TypeReg, tar.TypeRegA:
		if err := u.space.takeFile(hdr.Size); err != nil {
			return err
		}
		if err := u.writeFile(target, r); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := os.Symlink(hdr.Linkname, target); err != nil {
			return err
		}
	case tar.TypeLink:
		return u.hardlink(target, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		mode := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[hdr.Typeflag]
		dev := unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
		if err := unix.Mknod(target, mode|uint32(hdr.Mode&0o7777), int(dev)); err != nil {
			return err
		}
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
	return u.metadata(target, rel, hdr)
}

type whiteoutKind int

const (
	whiteoutNone whiteoutKind = iota
	whiteoutFile              // .wh.NAME: NAME is deleted
	whiteoutDir               // .wh..wh..opq: what lower layers have in this directory is hidden
	whiteoutAUFS              // .wh..wh.*, or under such a directory: aufs bookkeeping
)

// whiteout tells whether the entry at rel is a whiteout, and refuses one that
// hides nothing a layer can hold: the name a whiteout hides is never empty, . or
// .., which would delete the layer root or what is above it. A whiteout is a
// regular file, never a directory or a link, and nothing is inside one. An
// opaque whiteout at the layer root is refused too: overlayfs ignores
// trusted.overlay.opaque on a lowerdir's root, so the image would not look the
// way the layer says.
func whiteout(rel string, hdr *tar.Header) (whiteoutKind, error) {
	dir, base := path.Split(rel)
	for _, c := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		switch {
		case c == whiteoutOpaque:
			return 0, fmt.Errorf("opaque whiteout %s used as a directory", c)
		case strings.HasPrefix(c, whiteoutMeta):
			return whiteoutAUFS, nil
		case strings.HasPrefix(c, whiteoutPrefix):
			return 0, fmt.Errorf("whiteout %s used as a directory", c)
		}
	}
	var kind whiteoutKind
	switch {
	case base == whiteoutOpaque:
		if dir == "" {
			return 0, errors.New("opaque whiteout at the layer root: overlayfs would ignore it")
		}
		kind = whiteoutDir
	case strings.HasPrefix(base, whiteoutMeta):
		return whiteoutAUFS, nil
	case strings.HasPrefix(base, whiteoutPrefix):
		switch name := strings.TrimPrefix(base, whiteoutPrefix); name {
		case "", ".", "..":
			return 0, fmt.Errorf("whiteout of %q: not a name in a directory", name)
		}
		kind = whiteoutFile
	default:
		return whiteoutNone, nil
	}
	if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA {
		return 0, fmt.Errorf("whiteout is a tar entry of type %q, not a regular file", hdr.Typeflag)
	}
	return kind, nil
}

// clear removes what is at rel before an entry replaces it; a directory stays when
// the new entry is a directory too (its metadata is then updated).
func (u *unpacker) clear(rel string, keepDir bool) error {
	if rel == "" {
		return nil
	}
	target := filepath.Join(u.root, rel)
	fi, err := os.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() && keepDir {
		return nil
	}
	for d := range u.dirs {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			delete(u.dirs, d)
			delete(u.dirTimes, d)
		}
	}
	return os.RemoveAll(target)
}

func (u *unpacker) writeFile(target string, r io.Reader) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(f, r, u.buf); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// hardlink links target to the entry linkname names, which must already be in the
// layer and reached without following a symlink.
func (u *unpacker) hardlink(target, linkname string) error {
	rel, err := relPath(linkname)
	if err != nil {
		return err
	}
	if rel == "" {
		return fmt.Errorf("hard link to the layer root")
	}
	if err := u.parents(rel, false); err != nil {
		return fmt.Errorf("hard link target %s: %w", linkname, err)
	}
	src := filepath.Join(u.root, rel)
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("hard link target %s: %w", linkname, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("hard link target %s is a directory", linkname)
	}
	return os.Link(src, target)
}

// metadata sets owner, mode, xattrs and times, in that order: chown clears setuid
// bits and file capabilities, so it goes first.
func (u *unpacker) metadata(target, rel string, hdr *tar.Header) error {
	if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeSymlink {
		if err := unix.Chmod(target, uint32(hdr.Mode&0o7777)); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	for k, v := range hdr.PAXRecords {
		if attr, ok := strings.CutPrefix(k, xattrPAXPrefix); ok {
			if err := unix.Lsetxattr(target, attr, []byte(v), 0); err != nil {
				return fmt.Errorf("set xattr %s: %w", attr, err)
			}
		}
	}
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	if hdr.Typeflag == tar.TypeDir {
		u.dirTimes[rel] = dirTime{atime: atime, mtime: hdr.ModTime}
		return nil
	}
	return setTimes(target, atime, hdr.ModTime)
}

func setTimes(target string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

// finish sets directory times. Each directory is still the real directory its
// entry made (clear forgets the times of what it removes), so no path here goes
// through a symlink a later entry put in its place; and setting a directory's
// times does not change its parent's, so the order does not matter.
func (u *unpacker) finish() error {
	for rel, d := range u.dirTimes {
		if err := setTimes(filepath.Join(u.root, rel), d.atime, d.mtime); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	return nil
}
