package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// entry is a name in a directory: a symlink met while resolving a path, or
// the first component of a path that does not exist yet.
type entry struct {
	dir  string // real path of the directory, no symlink in it
	name string
}

// resolution is where a path leads and what decides it.
type resolution struct {
	links []entry // every symlink followed on the way, in order
	real  string  // the real path it leads to; "" when it leads nowhere
	// missing, when real is "": the last existing directory on the way
	// and the name that is not in it.
	missing entry
}

// maxLinks is the kernel's limit on symlinks followed in one lookup (MAXSYMLINKS).
const maxLinks = 40

// resolve follows abs (an absolute path) the way the kernel's path lookup
// does, one component at a time, and says which directory entries decide
// where it leads: those are what to watch to see it change.
func resolve(abs string) resolution {
	var r resolution
	real := "/"
	rest := split(abs)
	for followed := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case ".":
			continue
		case "..":
			real = filepath.Dir(real)
			continue
		}
		next := filepath.Join(real, c)
		fi, err := os.Lstat(next)
		if err != nil {
			r.missing = entry{dir: real, name: c}
			return r
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if len(rest) > 0 && !fi.IsDir() {
				r.missing = entry{dir: real, name: c}
				return r // ENOTDIR
			}
			real = next
			continue
		}
		followed++
		target, err := os.Readlink(next)
		if err != nil || followed > maxLinks {
			r.missing = entry{dir: real, name: c}
			return r
		}
		r.links = append(r.links, entry{dir: real, name: c})
		if filepath.IsAbs(target) {
			real = "/"
		}
		rest = append(split(target), rest...)
	}
	r.real = real
	return r
}

func split(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// inode identifies a directory as inotify watches it: a directory deleted and
// made again at the same path is another one.
type inode struct{ dev, ino uint64 }

func inodeOf(path string) (inode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return inode{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inode{}, errors.ErrUnsupported
	}
	return inode{dev: uint64(st.Dev), ino: st.Ino}, nil
}
