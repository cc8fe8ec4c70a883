package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// tarLayerDir writes the overlay lowerdir dir to w as an OCI layer tar, the same
// bytes for the same directory: entries in lexical order, hard links to the
// first path of their inode, 0/0 character devices as .wh. files, an opaque
// directory followed by its .wh..wh..opq, xattrs but overlayfs's own.
func tarLayerDir(ctx context.Context, dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	inodes := map[uint64]string{}
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("stat %s: %w", rel, err)
		}
		hdr := &tar.Header{
			Name: filepath.ToSlash(rel), Mode: int64(st.Mode & 0o7777),
			Uid: int(st.Uid), Gid: int(st.Gid),
			ModTime: time.Unix(st.Mtim.Unix()).UTC(), Format: tar.FormatPAX,
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev == 0 { // an overlay whiteout
				hdr.Name = filepath.ToSlash(filepath.Join(filepath.Dir(rel), whiteoutPrefix+filepath.Base(rel)))
				// Unpacking keeps no time of a whiteout: nor does this.
				hdr.Typeflag, hdr.Mode, hdr.ModTime = tar.TypeReg, 0o644, exportTime
				return tw.WriteHeader(hdr)
			}
			hdr.Typeflag = tar.TypeChar
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		case unix.S_IFBLK:
			hdr.Typeflag = tar.TypeBlock
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case unix.S_IFDIR:
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case unix.S_IFREG:
			if st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
					break
				}
				inodes[st.Ino] = hdr.Name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		default:
			return fmt.Errorf("%s: unsupported file type %o", rel, st.Mode&unix.S_IFMT)
		}
		opaque, err := xattrs(p, hdr)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			n, err := io.CopyBuffer(tw, io.LimitReader(f, hdr.Size), buf)
			f.Close()
			if err == nil && n != hdr.Size {
				err = fmt.Errorf("%s: shrank while read", rel)
			}
			if err != nil {
				return err
			}
		}
		if opaque {
			return tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeReg, Name: hdr.Name + whiteoutOpaque, Mode: 0o644,
				ModTime: hdr.ModTime, Format: tar.FormatPAX,
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// xattrs puts the extended attributes of p, but overlayfs's own, in hdr's
// PAX records, sorted (archive/tar sorts them), and says whether p is an
// opaque directory.
func xattrs(p string, hdr *tar.Header) (bool, error) {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			err = nil
		}
		return false, err
	}
	list := make([]byte, size)
	if size, err = unix.Llistxattr(p, list); err != nil {
		return false, err
	}
	opaque := false
	for _, attr := range strings.Split(strings.TrimRight(string(list[:size]), "\x00"), "\x00") {
		if attr == "" {
			continue
		}
		v, err := getxattr(p, attr)
		if err != nil {
			return false, err
		}
		if strings.HasPrefix(attr, "trusted.overlay.") {
			opaque = opaque || (attr == "trusted.overlay.opaque" && bytes.Equal(v, []byte("y")))
			continue
		}
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords[xattrPAXPrefix+attr] = string(v)
	}
	return opaque && hdr.Typeflag == tar.TypeDir, nil
}

func getxattr(p, attr string) ([]byte, error) {
	for size := 256; ; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Lgetxattr(p, attr, buf)
		if errors.Is(err, unix.ERANGE) && size < 1<<20 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s: %w", attr, err)
		}
		return buf[:n], nil
	}
}
