package logfiles

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Time formats of the kubelet's CRI log reader (cri-client pkg/logs).
const (
	timeFormatIn  = "2006-01-02T15:04:05.999999999Z07:00" // RFC3339NanoLenient
	timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00" // RFC3339NanoFixed
)

// EntryWriter writes what CRI log lines ("<time> <stream> <P|F> <content>")
// hold, as the kubelet's ReadLogs does: the content of a full line (F) with
// a newline, of a partial one (P) without; lines before since left out; with
// timestamps, each line of output starting with its time.
type EntryWriter struct {
	w          io.Writer
	since      time.Time
	timestamps bool
	lineStart  bool // the next entry starts a line of output
	buf        []byte
}

// NewEntryWriter returns an EntryWriter to w of the lines since (all when
// zero), with timestamps or not.
func NewEntryWriter(w io.Writer, since time.Time, timestamps bool) *EntryWriter {
	return &EntryWriter{w: w, since: since, timestamps: timestamps, lineStart: true}
}

// Entry writes line, a CRI log line with or without its newline. ok is false
// for a line that is not one, which is skipped as the kubelet skips it.
func (e *EntryWriter) Entry(line []byte) (ok bool, err error) {
	ts, rest, ok1 := bytes.Cut(line, []byte{' '})
	stream, rest, ok2 := bytes.Cut(rest, []byte{' '})
	tags, content, ok3 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || !ok3 || (string(stream) != "stdout" && string(stream) != "stderr") {
		return false, nil
	}
	// Tags after the first are for later versions of the format.
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	if string(tag) == "P" {
		content = bytes.TrimSuffix(content, []byte{'\n'})
	}
	var t time.Time
	if e.timestamps || !e.since.IsZero() {
		if t, err = time.Parse(timeFormatIn, string(ts)); err != nil {
			return false, nil
		}
		if t.Before(e.since) {
			return true, nil
		}
	}
	out := e.buf[:0]
	if e.timestamps && e.lineStart {
		out = t.AppendFormat(out, timeFormatOut)
		out = append(out, ' ')
	}
	out = append(out, content...)
	e.buf = out
	e.lineStart = len(content) == 0 || content[len(content)-1] == '\n'
	if _, err := e.w.Write(out); err != nil {
		return true, err
	}
	return true, nil
}

// File is one open file of a container's log, read line by line. A line
// the writer has not finished yet is kept until it has.
type File struct {
	f    *os.File
	gz   bool
	br   *bufio.Reader
	part []byte  // the start of a line read up to the end of the file
	took bool    // part was returned as a line: empty it first
	skip int64   // lines still to skip from the start (a tail in a gzipped file)
	r    ctxFile // f, read while the request lasts
}

// ctxFile reads a log file until ctx ends: a reader that writes nothing (a
// file of no lines, or lines before sinceTime) would not notice its client
// gone, and a file a container extended with a sparse terabyte is read for
// an hour.
type ctxFile struct {
	ctx context.Context
	f   *os.File
}

func (c ctxFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.Read(p)
}

func (c ctxFile) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.ReadAt(p, off)
}

// NewFile reads f, gzipped when gz, while ctx lasts. The File owns f.
func NewFile(ctx context.Context, f *os.File, gz bool) (*File, error) {
	lf := &File{f: f, gz: gz, r: ctxFile{ctx, f}}
	if err := lf.rewind(); err != nil {
		return nil, err
	}
	return lf, nil
}

// rewind reads the file from its start again.
func (lf *File) rewind() error {
	if _, err := lf.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", lf.f.Name(), err)
	}
	var r io.Reader = lf.r
	if lf.gz {
		zr, err := gzip.NewReader(lf.r)
		if err != nil {
			return fmt.Errorf("read %s: %w", lf.f.Name(), err)
		}
		r = zr
	}
	lf.br = bufio.NewReaderSize(r, 64<<10)
	lf.part, lf.took = lf.part[:0], false
	return nil
}

// seek makes a plain file's next line the one at offset.
func (lf *File) seek(offset int64) error {
	if _, err := lf.f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", lf.f.Name(), err)
	}
	lf.br.Reset(lf.r)
	lf.part, lf.took = lf.part[:0], false
	return nil
}

// Line returns the next whole line, newline included, valid until the next
// call; io.EOF when there is none (yet). Lines Tail skipped are not returned.
func (lf *File) Line() ([]byte, error) {
	for {
		b, err := lf.line()
		if err == nil && lf.skip > 0 {
			lf.skip--
			continue
		}
		return b, err
	}
}

func (lf *File) line() ([]byte, error) {
	if lf.took {
		lf.part, lf.took = lf.part[:0], false
	}
	for {
		b, err := lf.br.ReadSlice('\n')
		switch {
		case err == nil && len(lf.part) == 0:
			return b, nil
		case err == nil:
			lf.part = appendCut(lf.part, b)
			if lf.part[len(lf.part)-1] != '\n' {
				lf.part = append(lf.part, '\n') // cut: it ends here
			}
			lf.took = true
			return lf.part, nil
		case errors.Is(err, bufio.ErrBufferFull):
			lf.part = appendCut(lf.part, b)
		default:
			lf.part = appendCut(lf.part, b)
			return nil, err
		}
	}
}

// maxLineRead bounds a line read from a log file. The monitor writes none
// longer than MaxLogLine and its header; a longer one is in a file a
// container with podLogsDir mounted wrote or extended (a sparse terabyte
// without a newline costs it nothing): it is cut there and the rest of it
// dropped as read, so that a reader's memory does not grow with it.
const maxLineRead = 64 << 10

// appendCut appends b to part as far as maxLineRead allows.
func appendCut(part, b []byte) []byte {
	return append(part, b[:min(len(b), max(maxLineRead-len(part), 0))]...)
}

// Rest returns the line left without its newline at the end of the file,
// and forgets it: all there is of it once the file is no longer written.
func (lf *File) Rest() []byte {
	lf.took = true
	return lf.part
}

// Name is the path the file was opened at.
func (lf *File) Name() string { return lf.f.Name() }

// Stat is the open file's.
func (lf *File) Stat() (os.FileInfo, error) { return lf.f.Stat() }

func (lf *File) Close() error {
	return lf.f.Close()
}

// Tail makes the first of the file's last n lines the next Line, and
// returns how many it found there: n, or fewer when the file holds fewer.
// A gzipped file is counted through and its lines before skipped; a plain
// one is read backwards from its end and read on from that line.
func (lf *File) Tail(n int64) (found int64, err error) {
	if lf.gz {
		lines, err := lf.countLines()
		if err != nil {
			return 0, err
		}
		lf.skip = max(lines-n, 0)
		return lines - lf.skip, nil
	}
	fi, err := lf.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", lf.f.Name(), err)
	}
	offset, found, err := tailStart(lf.r, fi.Size(), n)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", lf.f.Name(), err)
	}
	return found, lf.seek(offset)
}

// tailStart returns where the last n lines of the first size bytes of f
// begin, and how many lines it found: n, or fewer from offset 0 when there
// are no more. A line ends at its newline; an unfinished last line is not
// counted, but is after the offset returned, as in the kubelet's
// findTailLineStartIndex.
func tailStart(f io.ReaderAt, size, n int64) (offset, found int64, err error) {
	buf := make([]byte, 32<<10)
	var newlines int64
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return 0, 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			// The (n+1)th newline from the end ends the line before them.
			if newlines++; newlines == n+1 {
				return start + int64(i) + 1, n, nil
			}
		}
		end = start
	}
	return 0, newlines, nil
}

// countLines counts the lines of a file read from its start, and rewinds it.
func (lf *File) countLines() (int64, error) {
	var n int64
	buf := make([]byte, 64<<10)
	for {
		m, err := lf.br.Read(buf)
		n += int64(bytes.Count(buf[:m], []byte{'\n'}))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", lf.f.Name(), err)
		}
	}
	return n, lf.rewind()
}
