// Package atomicfile replaces a file's content so that a reader, or the next
// process after a crash or a power cut, sees the old content or the new one,
// never a part, and so that a write that returned is on disk. It is the one
// way the daemon writes a record it relies on after a restart, on both sides
// (agent/ and oci/, which may import it); it imports the standard library
// only, as the container monitor links it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Step is a point of Write that a test can stop at.
type Step int

const (
	Created      Step = iota // the temp file exists, empty
	Written                  // the data is in the temp file
	Synced                   // the temp file is fsynced
	Renamed                  // the temp file replaced the target
	DirSynced                // the directory is fsynced: done
	ParentSynced             // a directory MkdirAll or MkdirWriteFiles made: its parent is fsynced
)

func (s Step) String() string {
	switch s {
	case Created:
		return "created"
	case Written:
		return "written"
	case Synced:
		return "synced"
	case Renamed:
		return "renamed"
	case DirSynced:
		return "dirsynced"
	case ParentSynced:
		return "parentsynced"
	}
	return fmt.Sprintf("Step(%d)", int(s))
}

// tempInfix is in every temp file's name, after "." and the target's name.
const tempInfix = ".tmp-"

var hook atomic.Pointer[func(Step, string)]

// SetTestHook makes every Write, WriteFiles and MkdirAll call f(step, path)
// at each step, until restore is called; WriteFiles calls it from several
// goroutines at once. For tests (counting fsyncs, killing a writer
// halfway); nil f removes the hook.
func SetTestHook(f func(step Step, path string)) (restore func()) {
	var old *func(Step, string)
	if f == nil {
		old = hook.Swap(nil)
	} else {
		old = hook.Swap(&f)
	}
	return func() { hook.Store(old) }
}

// SyncError is an fsync that failed, of a file or of a directory: what it
// was to make durable may not be, and writing it again proves nothing
// (Linux may have marked the failed pages clean).
type SyncError struct {
	Path string
	Err  error
}

func (e *SyncError) Error() string {
	var pe *fs.PathError
	if errors.As(e.Err, &pe) && pe.Path == e.Path {
		return e.Err.Error() // "sync PATH: ..." already
	}
	return "sync " + e.Path + ": " + e.Err.Error()
}
func (e *SyncError) Unwrap() error { return e.Err }

var syncFault atomic.Pointer[func(string) error]

// SetSyncFault makes every fsync fail with f(path) when that is not nil,
// until restore is called; path is the temp file's for a file's fsync, the
// directory's for a directory's. f is called before the fsync, so a test
// can also see which fsyncs are under way at once. For tests (a disk that
// fails an fsync).
func SetSyncFault(f func(path string) error) (restore func()) {
	old := syncFault.Swap(&f)
	return func() { syncFault.Store(old) }
}

// fsync fsyncs f, named path.
func fsync(f *os.File, path string) error {
	if fault := syncFault.Load(); fault != nil && *fault != nil {
		if err := (*fault)(path); err != nil {
			return &SyncError{path, err}
		}
	}
	if err := f.Sync(); err != nil {
		return &SyncError{path, err}
	}
	return nil
}

func step(s Step, path string) {
	if f := hook.Load(); f != nil {
		(*f)(s, path)
	}
}

// Write replaces path with data, mode 0600; see WriteMode.
func Write(path string, data []byte) error {
	return WriteMode(path, data, 0o600)
}

// WriteMode replaces path with data, mode perm: a temp file in the same
// directory, write, fsync, rename over path, fsync of the directory (so
// that the rename, and the new file's name, survive a power cut). On an
// error before the rename the temp file is removed and path is untouched;
// a process killed halfway leaves at most a temp file, named
// ".<name>.tmp-<random>" (IsTemp), which no reader of path takes for it.
// The error is the file system's, which names the file.
func WriteMode(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, syncAll)
}

// WriteContent replaces path with data, mode 0600, as Write does but without
// the directory's fsync: the content is on disk before the rename, and the
// rename is not waited for. After a power cut path is whole, new or old, or
// absent where it did not exist before: for a record whose absence its
// readers take for "never written", safely (a snapshot's meta.json: a
// snapshot without one is half made, and a power cut leaves nothing
// mounted). One wait on the disk where Write makes two.
func WriteContent(path string, data []byte) error {
	return write(path, data, 0o600, syncContent)
}

// Replace replaces path with data, mode 0600, as Write does but without
// its fsyncs: a reader sees the old content or the new, never a part, and
// a power cut may leave the old. For a record rewritten often whose last
// change may be lost (a pod's kept conditions, which move with every
// readiness flap).
func Replace(path string, data []byte) error {
	return write(path, data, 0o600, syncNone)
}

// syncLevel is which fsyncs write makes.
type syncLevel int

const (
	syncNone    syncLevel = iota // none (Replace)
	syncContent                  // the temp file's, before the rename (WriteContent)
	syncAll                      // the temp file's and the directory's after the rename (Write)
)

// write is WriteMode, with the fsyncs of file and directory that level says.
func write(path string, data []byte, perm fs.FileMode, level syncLevel) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempInfix)
	if err != nil {
		return err
	}
	tmp := f.Name()
	step(Created, path)
	if perm != 0o600 {
		err = f.Chmod(perm)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		step(Written, path)
		if level >= syncContent {
			err = fsync(f, tmp)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if level >= syncContent {
			step(Synced, path)
		}
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	step(Renamed, path)
	if level < syncAll {
		return nil
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	step(DirSynced, path)
	return nil
}

// File is one file of WriteFiles: its name in the directory, and its content.
type File struct {
	Name string
	Data []byte
}

// WriteFiles replaces each of files in dir, mode 0600, as Write does one,
// durably, but with fewer waits on the disk: every temp file is written,
// then all are fsynced at once, each is renamed over its file, and the
// directory is fsynced once. A journaling file system commits the fsyncs
// that wait together in one transaction (ext4's and XFS's group commit), so
// the three records of a pod's first start wait on the disk about twice
// rather than six times. Each file is whole, old or new, whatever happens;
// a power cut during WriteFiles may keep any of them, each whole, and one
// after it returned keeps all. On an error before the renames nothing is
// replaced and the temp files are removed; an error at a rename leaves the
// files before it replaced (the directory fsynced, best effort). A name is
// a file's name in dir: not a path, not a temp file's name (IsTemp), not
// longer than maxName, and once only.
func WriteFiles(dir string, files []File) error {
	if err := checkNames(dir, files); err != nil {
		return err
	}
	_, err := writeFiles(dir, files, nil)
	return err
}

// MkdirWriteFiles is WriteFiles into dir, a directory under top, which it
// makes first if missing, with its missing parents, mode perm, as MkdirAll;
// and so that dir's name is durable whoever made it (another writer may
// have made it with os.MkdirAll), it fsyncs the parent of every directory
// from top, exclusive, to dir, and of any it made, in the same wait as the
// files' fsyncs (a pod's first records then wait on the disk twice, not
// three times); when the write fails before those fsyncs, the parents are
// fsynced one after the other before it returns. top's own name is the
// caller's (dir == top: no parent fsynced). top and dir are clean paths
// with no symlink between them: the chain is worked out from their text.
func MkdirWriteFiles(top, dir string, perm fs.FileMode, files []File) error {
	if err := checkNames(dir, files); err != nil {
		return err
	}
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("write in %s: not under %s", dir, top)
	}
	made, err := mkdirAll(dir, perm)
	if err != nil {
		return err
	}
	dirs := made
	if rel != "." {
		d := filepath.Clean(top)
		for _, part := range strings.Split(rel, "/") {
			if d = filepath.Join(d, part); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	synced, err := writeFiles(dir, files, dirs)
	if err != nil && !synced {
		// Failed before the fsyncs: the directories stay, their names
		// durable, as MkdirAll leaves them, for a writer after.
		err = errors.Join(err, syncParents(dirs))
	}
	return err
}

// syncParents fsyncs the parent of each directory of dirs, in order.
func syncParents(dirs []string) error {
	for _, d := range dirs {
		if err := syncParent(d); err != nil {
			return err
		}
	}
	return nil
}

// syncParent fsyncs the parent of directory d, so that d's name is durable.
func syncParent(d string) error {
	if err := syncDir(filepath.Dir(d)); err != nil {
		return fmt.Errorf("sync directory of %s: %w", d, err)
	}
	step(ParentSynced, d)
	return nil
}

// checkNames refuses the names of files that WriteFiles does not take.
func checkNames(dir string, files []File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\x00") ||
			len(f.Name) > maxName || IsTemp(f.Name) || seen[f.Name] {
			return fmt.Errorf("write %q in %s: not a file name, or named twice", f.Name, dir)
		}
		seen[f.Name] = true
	}
	return nil
}

// writeFiles is WriteFiles of checked names, fsyncing the parents of dirs
// (each then ParentSynced) with the files; synced says whether it got to
// those fsyncs.
func writeFiles(dir string, files []File, dirs []string) (synced bool, err error) {
	tmps := make([]*os.File, 0, len(files))
	removeTemps := func(from int) {
		for _, t := range tmps[from:] {
			_ = t.Close()
			_ = os.Remove(t.Name())
		}
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		t, err := os.CreateTemp(dir, "."+f.Name+tempInfix)
		if err != nil {
			removeTemps(0)
			return false, err
		}
		tmps = append(tmps, t)
		step(Created, path)
		if _, err := t.Write(f.Data); err != nil {
			removeTemps(0)
			return false, err
		}
		step(Written, path)
	}
	// Each fsync in a goroutine of its own, so that they wait together.
	errs := make([]error, len(tmps)+len(dirs))
	syncOne := func(i int) {
		if i >= len(tmps) {
			errs[i] = syncParent(dirs[i-len(tmps)])
			return
		}
		if errs[i] = fsync(tmps[i], tmps[i].Name()); errs[i] == nil {
			step(Synced, filepath.Join(dir, files[i].Name))
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(errs); i++ {
		wg.Go(func() { syncOne(i) })
	}
	if len(errs) > 0 {
		syncOne(0)
	}
	wg.Wait()
	for i, t := range tmps {
		if err := t.Close(); errs[i] == nil {
			errs[i] = err
		}
	}
	if err := errors.Join(errs...); err != nil {
		removeTemps(0)
		return true, err
	}
	for i, t := range tmps {
		path := filepath.Join(dir, files[i].Name)
		if err := os.Rename(t.Name(), path); err != nil {
			removeTemps(i)
			if i > 0 {
				// The renames before it are kept: durably, or said.
				err = errors.Join(err, syncDir(dir))
			}
			return true, err
		}
		step(Renamed, path)
	}
	if len(tmps) == 0 {
		return true, nil
	}
	if err := syncDir(dir); err != nil {
		return true, fmt.Errorf("sync directory %s: %w", dir, err)
	}
	for _, f := range files {
		step(DirSynced, filepath.Join(dir, f.Name))
	}
	return true, nil
}

// maxName is the longest name WriteFiles takes: its temp file's name adds
// the dot, the infix and up to ten digits, within a file system's 255.
const maxName = 255 - 1 - len(tempInfix) - 10

// syncDir fsyncs a directory. A file system that cannot (EINVAL: some FUSE
// and network ones) offers nothing better, and is no error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return &SyncError{dir, err} // not synced: what it was for may not be durable
	}
	err = fsync(d, dir)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
}

// MkdirAll is os.MkdirAll that also fsyncs the parent of each directory it
// makes: a record fsynced into a new directory is lost in a power cut
// if the directory's own name is.
func MkdirAll(dir string, perm fs.FileMode) error {
	made, err := mkdirAll(dir, perm)
	if err != nil {
		return err
	}
	return syncParents(made)
}

// mkdirAll is os.MkdirAll, returning the directories it made, the
// outermost first; their parents are not fsynced.
func mkdirAll(dir string, perm fs.FileMode) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return nil, err
	}
	slices.Reverse(missing)
	return missing, nil
}

// IsTemp reports whether name (a base name) is one of Write's temp files,
// left by a writer that died before its rename.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempInfix)
}

// Read returns the content of the record at path, at most max bytes: an
// error wrapping fs.ErrNotExist when there is none, and an error naming the
// path when it is not a regular file or is larger. The open does not block
// (O_NONBLOCK): a FIFO put in a record's place would otherwise hold its
// reader, at a daemon's start or in its reconcile loop, waiting for a
// writer; and a device is never read without end.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
}
