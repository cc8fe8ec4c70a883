package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// logOptions are the kubelet API's log options /containerLogs takes
// (v1.PodLogOptions as query parameters).
type logOptions struct {
	previous   bool
	follow     bool
	timestamps bool
	tail       int64     // lines from the end; -1: all
	since      time.Time // lines before are left out
	limit      int64     // bytes of output at most; 0: no limit
}

// parseLogOptions reads previous, follow, timestamps, tailLines and
// sinceSeconds or sinceTime, checked as the API server validates them.
func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	o := logOptions{tail: -1}
	for name, dst := range map[string]*bool{"previous": &o.previous, "follow": &o.follow, "timestamps": &o.timestamps} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, fmt.Errorf("%s=%q is not true or false", name, v)
			}
			*dst = b
		}
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return o, fmt.Errorf("tailLines=%q is not a number of lines", v)
		}
		o.tail = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("limitBytes=%q is not a number of bytes, 1 or more", v)
		}
		o.limit = n
	}
	secs, at := q.Get("sinceSeconds"), q.Get("sinceTime")
	switch {
	case secs != "" && at != "":
		return o, errors.New("sinceSeconds and sinceTime: give at most one")
	case secs != "":
		n, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("sinceSeconds=%q is not a number of seconds, 1 or more", secs)
		}
		o.since = now.Add(-time.Duration(n) * time.Second)
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return o, fmt.Errorf("sinceTime=%q is not an RFC 3339 time", at)
		}
		o.since = t
	}
	return o, nil
}

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}, the
// kubelet API's path, with its options (parseLogOptions): the container's
// output as it wrote it, CRI framing removed, from every file of the run,
// rotated (gzipped or not) then live. With follow it goes on, woken by
// inotify, through rotations and into the container's next runs, until the
// agent says the container will write no more (LogEnded) or the client
// goes.
func containerLogs(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		opts, err := parseLogOptions(r.URL.Query(), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		path, err := a.LogFile(r.Context(), ns, pod, ctr, opts.previous)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		lr, err := openLogs(r.Context(), path, opts)
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, fs.ErrNotExist) {
				code = http.StatusNotFound // removed meanwhile
			}
			http.Error(w, err.Error(), code)
			return
		}
		defer lr.Close()
		lr.ended = func(path string) bool { return a.LogEnded(ns, pod, ctr, path) }
		lr.changed = a.Changed
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var out io.Writer = w
		if opts.limit > 0 {
			out = &limitWriter{w: w, left: opts.limit}
		}
		if err := lr.copy(r.Context(), out); err != nil && !errors.Is(err, errLimitReached) && r.Context().Err() == nil {
			logger.Debug("log stream ended", "path", path, "err", err)
		}
	}
}

// errLimitReached ends a log whose limitBytes were written.
var errLimitReached = errors.New("limitBytes reached")

// limitWriter writes the first left bytes, then fails, as the kubelet's
// LimitWriter under ReadLogs does; it passes Flush on.
type limitWriter struct {
	w    http.ResponseWriter
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errLimitReached
	}
	short := int64(len(p)) > l.left
	if short {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && short {
		err = errLimitReached
	}
	return n, err
}

func (l *limitWriter) Flush() { http.NewResponseController(l.w).Flush() }

// logReader reads the log of a container, one run after the other: each
// run's rotated files, oldest first, then its live file <attempt>.log.
type logReader struct {
	ctx     context.Context // the request's: every file is read while it lasts
	opts    logOptions
	dir     string
	attempt int
	live    string
	// after is the stamp of the newest rotated file of the run read or
	// queued: rotation names a newer file with a greater one.
	after string
	queue []*logfiles.File // rotated files to read, oldest first
	cur   *logfiles.File   // the live file as opened; nil if there was none
	left  int64            // lines to write before stopping; -1: no limit

	watch   *fsnotify.Watcher      // the log directory, when following
	ended   func(path string) bool // the run of path is the last and is over
	changed func() <-chan struct{} // closed when ended may have changed
}

// openLogs opens the run whose live file is path, at the tail asked for.
// When following, the directory is watched before anything is read, so no
// change after is missed.
func openLogs(ctx context.Context, path string, opts logOptions) (_ *logReader, err error) {
	attempt, ok := logfiles.LogAttempt(filepath.Base(path))
	if !ok {
		return nil, fmt.Errorf("log %s is not a run's log", path)
	}
	lr := &logReader{ctx: ctx, opts: opts, dir: filepath.Dir(path), attempt: attempt, live: path, left: -1}
	defer func() {
		if err != nil {
			lr.Close()
		}
	}()
	if opts.follow {
		if lr.watch, err = fsnotify.NewWatcher(); err != nil {
			return nil, fmt.Errorf("watch %s: %w", lr.dir, err)
		}
		if err := lr.watch.Add(lr.dir); err != nil {
			return nil, fmt.Errorf("watch %s: %w", lr.dir, err)
		}
	}
	if _, err := lr.openRun(nil); err != nil {
		return nil, err
	}
	if opts.tail >= 0 {
		if !opts.follow {
			// The kubelet's limitedMode: lines written meanwhile are not.
			lr.left = opts.tail
		}
		if err := lr.seekTail(opts.tail); err != nil {
			return nil, err
		}
	}
	return lr, nil
}

// openRun opens the run's live file and queues its rotated files newer
// than after, from one consistent look: the live file is the same before
// and after its rotated files are listed, so no rotation falls between.
// prev is the live file read before, whose own rotated name is not queued
// again. It reports whether it found anything to read.
func (lr *logReader) openRun(prev *logfiles.File) (bool, error) {
	var f *os.File
	var inUse []logfiles.RotatedLog
	for {
		var err error
		f, err = openLog(lr.live)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("open %s: %w", lr.live, err)
		}
		inUse, _, err = logfiles.RotatedLogs(lr.live)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil // the pod's logs are being removed: what is open is all
		}
		if err != nil {
			closeFile(f)
			return false, err
		}
		if f == nil || sameFile(f, lr.live) {
			break
		}
		f.Close() // rotated meanwhile: look again
	}
	var newer []logfiles.RotatedLog
	for _, rl := range inUse {
		if rl.Stamp > lr.after {
			newer = append(newer, rl)
		}
	}
	if len(newer) > 0 {
		lr.after = newer[len(newer)-1].Stamp
	}
	// prev was renamed to the first name after the newest it saw, and may
	// have been compressed since. That name is gone only when the file was
	// removed as one too many, which only a reader many rotations behind
	// sees; then the first name, if not compressed, is of another file.
	if prev != nil && len(newer) > 0 && !isOtherFile(prev, newer[0]) {
		newer = newer[1:]
	}
	for _, rl := range newer {
		lf, err := openRotated(lr.ctx, rl)
		if err != nil {
			closeFile(f)
			return false, err
		}
		if lf != nil {
			lr.queue = append(lr.queue, lf)
		}
	}
	if f != nil {
		lf, err := logfiles.NewFile(lr.ctx, f, false)
		if err != nil {
			f.Close()
			return false, err
		}
		lr.cur = lf
	}
	return f != nil || len(newer) > 0, nil
}

// openLog opens a log file, never through a symlink, in it or in any
// directory beneath the pod log directory (logfiles.OpenLog): one planted
// by a container that has the host's log directory mounted would serve any
// host file to whoever may read logs.
func openLog(path string) (*os.File, error) {
	return logfiles.OpenLog(path)
}

// statLog is os.Stat of a log file as openLog opens it.
func statLog(path string) (os.FileInfo, error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// openRotated opens a rotated file, or its compressed copy when it was
// compressed meanwhile; nil when it was removed.
func openRotated(ctx context.Context, rl logfiles.RotatedLog) (*logfiles.File, error) {
	path, gz := rl.Path, rl.Compressed
	f, err := openLog(path)
	if errors.Is(err, fs.ErrNotExist) && !gz {
		path, gz = path+logfiles.CompressedLogSuffix, true
		f, err = openLog(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	lf, err := logfiles.NewFile(ctx, f, gz)
	if err != nil {
		f.Close()
		return nil, err
	}
	return lf, nil
}

// isOtherFile reports whether rl is known not to be f: an uncompressed file
// that is not f. One compressed, or compressed meanwhile, may be f.
func isOtherFile(f *logfiles.File, rl logfiles.RotatedLog) bool {
	if rl.Compressed {
		return false
	}
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := statLog(rl.Path)
	return err == nil && !os.SameFile(a, b)
}

// sameFile reports whether f, an *os.File or a *logfiles.File, is the file
// at path now.
func sameFile(f interface{ Stat() (os.FileInfo, error) }, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := statLog(path)
	return err == nil && os.SameFile(a, b)
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// seekTail starts the run at the first of its last n lines, counted from
// the live file back through the rotated ones.
func (lr *logReader) seekTail(n int64) error {
	if lr.cur != nil {
		found, err := lr.cur.Tail(n)
		if err != nil {
			return err
		}
		n -= found
	}
	i := len(lr.queue) - 1
	for ; i >= 0 && n > 0; i-- {
		found, err := lr.queue[i].Tail(n)
		if err != nil {
			return err
		}
		n -= found
	}
	// The files before hold none of the lines asked for.
	for _, lf := range lr.queue[:i+1] {
		lf.Close()
	}
	lr.queue = lr.queue[i+1:]
	return nil
}

func (lr *logReader) Close() {
	for _, lf := range lr.queue {
		lf.Close()
	}
	if lr.cur != nil {
		lr.cur.Close()
	}
	if lr.watch != nil {
		lr.watch.Close()
	}
}

// copy writes the log to w: what is there, and with follow what comes, until
// the container will write no more or ctx ends.
func (lr *logReader) copy(ctx context.Context, w io.Writer) error {
	out := logfiles.NewEntryWriter(w, lr.opts.since, lr.opts.timestamps)
	flusher, _ := w.(http.Flusher)
	for {
		for len(lr.queue) > 0 {
			lf := lr.queue[0]
			err := lr.drain(out, lf, true)
			lf.Close()
			lr.queue = lr.queue[1:]
			if err != nil {
				return err
			}
		}
		if lr.cur != nil {
			if err := lr.drain(out, lr.cur, !lr.opts.follow); err != nil {
				return err
			}
		}
		if !lr.opts.follow || lr.left == 0 {
			return nil
		}
		if flusher != nil {
			flusher.Flush()
		}
		// Everything written so far is read. What the agent says, and
		// which runs there are, is taken before the live file is looked at:
		// a run is over before either says so.
		changed := lr.changed()
		ended := lr.ended(lr.live)
		next, err := lr.nextRun()
		if err != nil {
			return err
		}
		if lr.cur == nil || !sameFile(lr.cur, lr.live) {
			// Rotated (or gone): nothing more is written to it.
			prev := lr.cur
			lr.cur = nil
			var err error
			if prev != nil {
				err = lr.drain(out, prev, true)
			}
			found := false
			if err == nil {
				found, err = lr.openRun(prev)
			}
			if prev != nil {
				prev.Close() // open until then: its stat tells its rotated name apart
			}
			if err != nil {
				return err
			}
			if found {
				continue
			}
		}
		if next >= 0 {
			// The next run begins once this one's monitor is done with
			// its log, whose live file was in place above: all is read.
			if lr.cur != nil {
				err := lr.drain(out, lr.cur, true)
				lr.cur.Close()
				lr.cur = nil
				if err != nil {
					return err
				}
			}
			lr.attempt, lr.live, lr.after = next, filepath.Join(lr.dir, logfiles.LogFileName(next)), ""
			if _, err := lr.openRun(nil); err != nil {
				return err
			}
			continue
		}
		if ended {
			if lr.cur != nil {
				return lr.drain(out, lr.cur, true)
			}
			return nil
		}
		if err := lr.wait(ctx, changed); err != nil {
			return err
		}
	}
}

// drain writes the whole lines lf has, and with final the unfinished one at
// its end too.
func (lr *logReader) drain(out *logfiles.EntryWriter, lf *logfiles.File, final bool) error {
	write := func(line []byte) error {
		if lr.left == 0 {
			return nil
		}
		ok, err := out.Entry(line)
		if ok && lr.left > 0 {
			lr.left--
		}
		return err
	}
	for {
		line, err := lf.Line()
		if err == nil {
			if err := write(line); err != nil {
				return err
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", lf.Name(), err)
		}
		if final {
			if rest := lf.Rest(); len(rest) > 0 {
				return write(rest)
			}
		}
		return nil
	}
}

// nextRun returns the first run after the one being read that has a log
// file, or -1.
func (lr *logReader) nextRun() (int, error) {
	runs, err := logfiles.Runs(lr.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("list %s: %w", lr.dir, err)
	}
	for _, n := range runs {
		if n > lr.attempt {
			return n, nil
		}
	}
	return -1, nil
}

// wait returns when the log directory or a pod's status changed, or with
// ctx's error.
func (lr *logReader) wait(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case _, ok := <-lr.watch.Events:
		if !ok {
			return errors.New("watch of the log directory ended")
		}
	case err, ok := <-lr.watch.Errors:
		// An overflow lost events: the next look covers them.
		if !ok {
			return errors.New("watch of the log directory ended")
		}
		if !errors.Is(err, fsnotify.ErrEventOverflow) {
			return fmt.Errorf("watch %s: %w", lr.dir, err)
		}
	}
	// What else came meanwhile, the next look covers too.
	for {
		select {
		case _, ok := <-lr.watch.Events:
			if !ok {
				return nil
			}
		case _, ok := <-lr.watch.Errors:
			if !ok {
				return nil
			}
		default:
			return nil
		}
	}
}
