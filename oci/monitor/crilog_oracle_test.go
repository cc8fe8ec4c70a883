package monitor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// criLog is the tests' oracle of the C monitor's log writer (monitor.c, the
// one that writes a container's log): what it writes, the tests hold the C
// writer to, entry for entry. It writes container output in the CRI log
// format: "<RFC3339Nano> <stream> <F|P> <content>\n".
//
// A write that fails (a full disk) loses that entry but never stops the
// copy: a container whose output is not drained blocks on its next write
// once the pipe is full. The failure is logged once, and so is the recovery.
//
// With rotation, the live file is renamed to <path>.<stamp> before an entry
// would take it past MaxSize, and a new one opened, under the same lock as
// the writes: every entry is in exactly one file, and the files in stamp
// order hold the entries in the order written. The oldest rotated files
// are removed then, so that at most MaxFiles files exist, the live one
// included. Compressing the rotated files but the newest is done by another
// goroutine, so that the copy never waits for it.
//
// Every file of the log is created, renamed, removed and compressed in the
// container's log directory as opened once, beneath the pod log directory
// and through no symlink (logfiles.MakeContainerDir), by *at calls on that
// descriptor: a container that mounts the pod log directory and swaps its
// own directory for a symlink does not move the monitor's writes, renames
// or removals onto the host.
type criLog struct {
	log  *slog.Logger
	now  func() time.Time
	path string   // for messages; files are worked on in dir by name
	dir  *os.File // the container's log directory
	name string   // of the live file in dir

	mu           sync.Mutex // guards the fields below: lines of both streams never interleave
	rot          LogRotation
	f            *os.File
	size         int64 // of f
	rotateAt     int64 // size past which f is rotated; later after a failed rotation
	rotated      []rotatedFile
	rotateFailed bool   // the last rotation failed
	buf          []byte // entries being written
	head         []byte // "<time> <stream>" of the entries being written
	failing      bool   // the last write failed
	lost         int    // entries lost since writes began to fail
	closed       bool   // Close was called: rotation changes no more

	compressDue chan struct{} // one slot: a rotation left files to compress
	closing     chan struct{} // closed by Close: compression stops
	compressed  chan struct{} // closed when the compressor has ended
}

// rotatedFile is one of the log's rotated files, oldest first in
// criLog.rotated.
type rotatedFile struct {
	stamp string
	gz    bool
}

func openCRILog(path string, rot LogRotation, log *slog.Logger) (*criLog, error) {
	dir, err := logfiles.MakeContainerDir(filepath.Dir(path), 0o755)
	if err != nil {
		return nil, fmt.Errorf("create log dir for %s: %w", path, err)
	}
	return openCRILogIn(dir, path, rot, log)
}

// openCRILogIn is openCRILog in the log directory dir, opened already (by
// the monitor's start, for its exit recorder); it takes dir over, closing
// it on failure.
func openCRILogIn(dir *os.File, path string, rot LogRotation, log *slog.Logger) (*criLog, error) {
	l := &criLog{dir: dir, name: filepath.Base(path), now: time.Now, log: log, path: path}
	f, err := l.openLive()
	if err != nil {
		_ = dir.Close()
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	l.f = f
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		l.size = fi.Size()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.setRotationLocked(rot); err != nil {
		_ = f.Close()
		_ = dir.Close()
		return nil, err
	}
	return l, nil
}

// openLive opens (creates) the live file in the log directory, when it is a
// regular file: a device node or FIFO planted under its name is not opened.
func (l *criLog) openLive() (*os.File, error) {
	fd, err := logfiles.OpenRegularAt(int(l.dir.Fd()), l.name, logFileFlags, 0o640)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: l.path, Err: err}
	}
	return os.NewFile(uintptr(fd), l.path), nil
}

// dirFd is the log directory's descriptor, for *at calls.
func (l *criLog) dirFd() int { return int(l.dir.Fd()) }

// setRotation changes when the log rotates (a reload changed
// containerLogMaxSize or containerLogMaxFiles): the next entry that would
// take the live file past the new MaxSize rotates it, and rotated files
// beyond the new MaxFiles are removed now, oldest first.
func (l *criLog) setRotation(rot LogRotation) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	return l.setRotationLocked(rot)
}

func (l *criLog) setRotationLocked(rot LogRotation) error {
	if rot.MaxSize <= 0 {
		l.rot = LogRotation{MaxSize: rot.MaxSize}
		return nil
	}
	rot.MaxFiles = max(rot.MaxFiles, 2)
	wasOn := l.rot.MaxSize > 0
	l.rot, l.rotateAt = rot, rot.MaxSize
	if wasOn {
		// The compressor goes on; what the new count leaves out goes now.
		for len(l.rotated) > rot.MaxFiles-1 {
			old := l.rotatedName(l.rotated[0].stamp)
			if err := errors.Join(l.removeIfExists(old+logfiles.CompressedLogSuffix), l.removeIfExists(old)); err != nil {
				return fmt.Errorf("remove rotated log %s: %w", old, err)
			}
			l.rotated = l.rotated[1:]
		}
		return nil
	}
	// Normally none: a new run's log is a new file.
	inUse, unused, err := logfiles.RotatedLogsAt(l.dirFd(), l.name)
	if err != nil {
		return err
	}
	for _, u := range unused {
		_ = l.removeIfExists(u)
	}
	l.rotated = l.rotated[:0]
	for _, r := range inUse {
		l.rotated = append(l.rotated, rotatedFile{stamp: r.Stamp, gz: r.Compressed})
	}
	if l.closing == nil { // the first time rotation is on: its compressor
		l.compressDue = make(chan struct{}, 1)
		l.closing = make(chan struct{})
		l.compressed = make(chan struct{})
		go l.compressor()
	}
	select {
	case l.compressDue <- struct{}{}:
	default:
	}
	return nil
}

// copyBuffer is how much of a stream copy reads at once: a pipe's capacity.
const copyBuffer = 64 * 1024

// copy reads stream until EOF and writes each line as an entry. The whole
// lines of each read are written with one write(2) before the next read,
// so that a fast writer costs a write per read rather than per line, and a
// line never waits in the monitor for more. The start of a line waits for
// its end, up to MaxLogLine bytes: that much is written as a partial entry.
// It returns nil at EOF, or the read error; write errors only lose entries.
func (l *criLog) copy(stream string, r io.Reader) error {
	buf := make([]byte, copyBuffer)
	e := &entries{stream: stream}
	held := 0 // buf[:held] is the start of a line
	for {
		n, err := r.Read(buf[held:])
		data := buf[:held+n]
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			e.add(data[:i], false)
			data = data[i+1:]
		}
		for len(data) >= MaxLogLine {
			e.add(data[:MaxLogLine], true)
			data = data[MaxLogLine:]
		}
		if err != nil && len(data) > 0 {
			e.add(data, true) // the end of the stream ends it
			data = nil
		}
		l.write(e)
		held = copy(buf, data)
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed):
			return nil
		default:
			return fmt.Errorf("read %s: %w", stream, err)
		}
	}
}

// entries are lines of one stream, read together, to be written together.
type entries struct {
	stream  string
	content []byte // of every entry, back to back
	ends    []int  // where each entry's content ends in content
	partial []bool // whether each entry is a part of a longer line
}

// add adds a line, or a part of one, split into entries of at most
// MaxLogLine bytes: a longer line makes partial ("P") entries.
func (e *entries) add(line []byte, partial bool) {
	for {
		n := min(len(line), MaxLogLine)
		e.content = append(e.content, line[:n]...)
		e.ends = append(e.ends, len(e.content))
		line = line[n:]
		if len(line) == 0 {
			e.partial = append(e.partial, partial)
			return
		}
		e.partial = append(e.partial, true)
	}
}

// write writes e's entries, stamped with the time now, and empties e; an
// entry a write could not take whole is counted lost.
func (l *criLog) write(e *entries) {
	if len(e.ends) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	head := l.now().UTC().AppendFormat(l.head[:0], time.RFC3339Nano)
	head = append(head, ' ')
	head = append(head, e.stream...)
	l.head = head
	b, n, start := l.buf[:0], 0, 0
	for i, end := range e.ends {
		tag := " F "
		if e.partial[i] {
			tag = " P "
		}
		size := len(head) + len(tag) + end - start + 1
		if l.rot.MaxSize > 0 && l.size+int64(len(b)) > 0 && l.size+int64(len(b)+size) > l.rotateAt {
			l.writeLocked(b, n)
			b, n = b[:0], 0
			l.rotateLocked()
		}
		b = append(b, head...)
		b = append(b, tag...)
		b = append(b, e.content[start:end]...)
		b = append(b, '\n')
		n++
		start = end
	}
	l.writeLocked(b, n)
	l.buf = b
	e.content, e.ends, e.partial = e.content[:0], e.ends[:0], e.partial[:0]
}

// writeLocked writes b, n entries, to the live file.
func (l *criLog) writeLocked(b []byte, n int) {
	if len(b) == 0 {
		return
	}
	w, err := l.f.Write(b)
	l.size += int64(w)
	switch {
	case err != nil && !l.failing:
		l.failing, l.lost = true, n
		l.log.Warn("cannot write container log, discarding output until it can",
			"path", l.f.Name(), "err", err)
	case err != nil:
		l.lost += n
	case l.failing:
		l.failing = false
		l.log.Info("writing container log again", "path", l.f.Name(), "lost_entries", l.lost)
	}
}

// rotateLocked removes the oldest rotated files so that, with the one it
// makes, MaxFiles files remain, renames the live file to <path>.<stamp> and
// opens a new one. A failed rotation keeps writing the live file, and is
// tried again once that has grown by another MaxSize.
//
// It follows the kubelet's containerLogManager.rotateLog, minus compression.
func (l *criLog) rotateLocked() {
	for len(l.rotated) > l.rot.MaxFiles-2 {
		old := l.rotatedName(l.rotated[0].stamp)
		// The compressor may be writing <old>.tmp: it removes that itself
		// once it finds the file gone from l.rotated.
		err := errors.Join(l.removeIfExists(old+logfiles.CompressedLogSuffix), l.removeIfExists(old))
		if err != nil {
			l.rotateFailedLocked(err)
			return
		}
		l.rotated = l.rotated[1:]
	}
	stamp := l.nextStamp()
	rotated := l.rotatedName(stamp)
	if err := l.rename(l.name, rotated); err != nil {
		l.rotateFailedLocked(err)
		return
	}
	f, err := l.openLive()
	if err != nil {
		// Back, so that readers find the live file where it was.
		if rerr := l.rename(rotated, l.name); rerr != nil {
			// Writes go on to the old file, now named as rotated.
			err = errors.Join(err, rerr)
			l.rotated = append(l.rotated, rotatedFile{stamp: stamp})
		}
		l.rotateFailedLocked(err)
		return
	}
	_ = l.f.Close()
	l.f, l.size, l.rotateAt = f, 0, l.rot.MaxSize
	l.rotated = append(l.rotated, rotatedFile{stamp: stamp})
	if l.rotateFailed {
		l.rotateFailed = false
		l.log.Info("rotating container log again", "path", l.path)
	}
	select {
	case l.compressDue <- struct{}{}:
	default: // a pass is due already
	}
}

func (l *criLog) rotateFailedLocked(err error) {
	l.rotateAt = l.size + l.rot.MaxSize
	if !l.rotateFailed {
		l.rotateFailed = true
		l.log.Warn("cannot rotate container log, writing on to the live file", "path", l.path, "err", err)
	}
}

// nextStamp names the next rotated file: the time now, as the kubelet does,
// or one second after the newest rotated file's when that is not earlier.
// Names then sort in the order the files were written even when the log
// rotates more than once a second or the clock steps back. Names not of the
// stamp's form (an operator's <log>.bak) are passed over, and a name in use
// is never taken again. The C monitor's next_stamp is the same.
func (l *criLog) nextStamp() string {
	stamp := l.now().Format(logfiles.RotatedLogTimeFormat)
	// Wall-clock arithmetic on the names: UTC has no daylight saving jumps.
	t, _ := time.Parse(logfiles.RotatedLogTimeFormat, stamp)
	var newest time.Time
	for _, r := range l.rotated {
		if n, err := time.Parse(logfiles.RotatedLogTimeFormat, r.stamp); err == nil && n.After(newest) {
			newest = n
		}
	}
	if !newest.IsZero() && !t.After(newest) {
		t = newest.Add(time.Second)
	}
	for {
		stamp = t.Format(logfiles.RotatedLogTimeFormat)
		if l.rotatedIndexLocked(stamp) < 0 {
			return stamp
		}
		t = t.Add(time.Second)
	}
}

// rotatedName names a rotated file in the log directory.
func (l *criLog) rotatedName(stamp string) string {
	return l.name + "." + stamp
}

// removeIfExists removes the file name of the log directory.
func (l *criLog) removeIfExists(name string) error {
	if err := unix.Unlinkat(l.dirFd(), name, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &os.PathError{Op: "remove", Path: filepath.Join(l.dir.Name(), name), Err: err}
	}
	return nil
}

// rename renames a file of the log directory within it.
func (l *criLog) rename(from, to string) error {
	if err := unix.Renameat(l.dirFd(), from, l.dirFd(), to); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(l.dir.Name(), from), New: to, Err: err}
	}
	return nil
}

// compressor compresses the rotated files but the newest, as the kubelet
// does (the newest stays as it is for readers still on it), after each
// rotation, until Close.
func (l *criLog) compressor() {
	defer close(l.compressed)
	failing := false
	for {
		select {
		case <-l.closing:
			return
		case <-l.compressDue:
		}
		err := l.compressOld()
		switch {
		case err != nil && !errors.Is(err, errClosing) && !failing:
			failing = true
			l.log.Warn("cannot compress rotated container log", "path", l.path, "err", err)
		case err == nil && failing:
			failing = false
			l.log.Info("compressing rotated container logs again", "path", l.path)
		}
	}
}

func (l *criLog) compressOld() error {
	var todo []string
	l.mu.Lock()
	for _, r := range l.rotated[:max(len(l.rotated)-1, 0)] {
		if !r.gz {
			todo = append(todo, r.stamp)
		}
	}
	l.mu.Unlock()
	for _, stamp := range todo {
		if err := l.compressOne(stamp); err != nil {
			return err
		}
	}
	return nil
}

// compressOne compresses <path>.<stamp> to <path>.<stamp>.gz through
// <path>.<stamp>.tmp, as the kubelet's compressLog does, unless rotation
// removed the file meanwhile. The compressed file is synced before it
// replaces the other, so a crash leaves one of them whole.
func (l *criLog) compressOne(stamp string) (err error) {
	src := l.rotatedName(stamp)
	tmp := src + logfiles.TempLogSuffix
	l.mu.Lock()
	limit := compressLimit(l.rot.MaxSize)
	l.mu.Unlock()
	err = gzipFile(l.dirFd(), src, tmp, limit, l.closing)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed as one too many
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	i := l.rotatedIndexLocked(stamp)
	if i < 0 {
		l.mu.Unlock()
		_ = l.removeIfExists(tmp)
		return nil // removed meanwhile: the .gz must not bring it back
	}
	err = l.rename(tmp, src+logfiles.CompressedLogSuffix)
	if err == nil {
		l.rotated[i].gz = true
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("compress %s: %w", src, err)
	}
	if err := l.removeIfExists(src); err != nil {
		return fmt.Errorf("remove %s after compressing it: %w", src, err)
	}
	return nil
}

func (l *criLog) rotatedIndexLocked(stamp string) int {
	for i, r := range l.rotated {
		if r.stamp == stamp {
			return i
		}
	}
	return -1
}

// rotation is when the log rotates now.
func (l *criLog) rotation() LogRotation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rot
}

// Close stops the compressor and closes the live file; a second Close does
// nothing.
func (l *criLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	closing, compressed := l.closing, l.compressed
	l.mu.Unlock()
	if closing != nil {
		close(closing)
		<-compressed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.f.Close(), l.dir.Close())
}
