// Package atomicdir projects a set of files into a directory so that a reader
// sees either the whole old set or the whole new one, in the layout of the
// kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go), which programs
// watching downward API volumes rely on: the files live in a hidden
// timestamped directory "..2006_01_02_15_04_05.NNNN", the symlink "..data"
// names it, and each visible top-level name is a symlink into "..data".
// An update writes a new timestamped directory and renames a new "..data"
// over the old one. Names starting with ".." are reserved.
//
// The directory is the runtime's, bound read-only into containers: nothing
// in it is container-controlled.
package atomicdir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	dataDir    = "..data"
	newDataDir = "..data_tmp"
)

// File is one file's content and mode.
type File struct {
	Data []byte
	Mode fs.FileMode
}

// Write makes dir hold exactly files (relative paths, '/'-separated, no
// '..' and not starting with ".."); gid, when not negative, owns them (a
// pod's fsGroup). It reports whether anything changed: an unchanged set is
// left as it is.
func Write(dir string, files map[string]File, gid int) (bool, error) {
	clean := make(map[string]File, len(files))
	for p, f := range files {
		if err := validate(p); err != nil {
			return false, err
		}
		clean[path.Clean(p)] = f
	}
	old, err := os.Readlink(filepath.Join(dir, dataDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	var stale []string
	if old != "" {
		same, err := sameContent(filepath.Join(dir, old), clean, gid)
		if err != nil {
			return false, err
		}
		if stale, err = staleNames(dir, clean); err != nil {
			return false, err
		}
		if same && len(stale) == 0 {
			// The data is current, but a write cut short after the
			// rename of ..data (a daemon killed) may have left a name
			// out: made here, as the kubelet's AtomicWriter does
			// (kubernetes/kubernetes#121472).
			if err := linkNames(dir, clean); err != nil {
				return false, err
			}
			return false, removeOrphans(dir, old)
		}
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := writeAll(ts, clean, gid); err != nil {
		_ = os.RemoveAll(ts)
		return false, err
	}
	tmp := filepath.Join(dir, newDataDir)
	_ = os.Remove(tmp) // left by a write that died halfway
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		_ = os.RemoveAll(ts)
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDir)); err != nil {
		_ = os.Remove(tmp)
		_ = os.RemoveAll(ts)
		return false, err
	}
	if err := linkNames(dir, clean); err != nil {
		return true, err
	}
	for _, n := range stale {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true, err
		}
	}
	return true, removeOrphans(dir, filepath.Base(ts))
}

// removeOrphans removes every timestamped directory of dir but current (the
// one ..data names): the previous one, and any a write cut short left,
// which may hold values since replaced (a rotated-out key that a container
// could still list in its secret volume). The kubelet's AtomicWriter removes
// only the previous one.
func removeOrphans(dir, current string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || !strings.HasPrefix(n, "..") || n == current || n == dataDir || n == newDataDir {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, n)))
	}
	return errors.Join(errs...)
}

// validate is the kubelet's validatePath.
func validate(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case path.IsAbs(p):
		return fmt.Errorf("invalid path %q: must be relative", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	case len(p) > 4096:
		return fmt.Errorf("invalid path %q: must be less than or equal to 4096 characters", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
		if len(part) > 255 {
			return fmt.Errorf("invalid path %q: each element must be less than or equal to 255 characters", p)
		}
	}
	return nil
}

// linkNames makes the visible symlink into ..data of each top-level name of
// files that has none.
func linkNames(dir string, files map[string]File) error {
	for _, top := range topNames(files) {
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(path.Join(dataDir, top), link); err != nil {
			return err
		}
	}
	return nil
}

func topNames(files map[string]File) []string {
	var out []string
	for p := range files {
		top, _, _ := strings.Cut(p, "/")
		if !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	slices.Sort(out)
	return out
}

// staleNames are the visible symlinks no longer in files.
func staleNames(dir string, files map[string]File) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	want := topNames(files)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || slices.Contains(want, e.Name()) {
			continue
		}
		out = append(out, e.Name())
	}
	return out, nil
}

func writeAll(ts string, files map[string]File, gid int) error {
	if err := own(ts, 0o755|fs.ModeDir, gid); err != nil {
		return err
	}
	for p, f := range files {
		full := filepath.Join(ts, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		for d := filepath.Dir(full); d != ts; d = filepath.Dir(d) {
			if err := own(d, 0o755|fs.ModeDir, gid); err != nil {
				return err
			}
		}
		if err := os.WriteFile(full, f.Data, 0o600); err != nil {
			return err
		}
		if err := own(full, f.Mode, gid); err != nil {
			return err
		}
	}
	return nil
}

// own sets the mode and, with gid, the group, read access for it added,
// as the kubelet's SetVolumeOwnership does for a read-only volume.
func own(p string, mode fs.FileMode, gid int) error {
	if gid >= 0 {
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		mode |= 0o440
		if mode.IsDir() {
			mode |= 0o110 | fs.ModeSetgid
		}
	}
	return os.Chmod(p, mode&(fs.ModePerm|fs.ModeSetgid))
}

// sameContent reports whether ts holds exactly files, with their modes.
func sameContent(ts string, files map[string]File, gid int) (bool, error) {
	n := 0
	err := filepath.WalkDir(ts, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(ts, p)
		f, ok := files[filepath.ToSlash(rel)]
		if !ok {
			return errDiffers
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := f.Mode.Perm()
		if gid >= 0 {
			want |= 0o440
		}
		if fi.Mode().Perm() != want {
			return errDiffers
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, f.Data) {
			return errDiffers
		}
		return nil
	})
	if errors.Is(err, errDiffers) {
		return false, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil && n == len(files), err
}

var errDiffers = errors.New("differs")
