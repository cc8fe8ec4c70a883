package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxLogLine is the longest log line written whole; longer lines are split
// into partial ("P") entries, as the kubelet's CRI log format allows.
const maxLogLine = 16 * 1024

// criLog writes container output in the CRI log format:
// "<RFC3339Nano> <stream> <F|P> <content>\n".
//
// A write that fails (a full disk) loses that entry but never stops the
// copy: a container whose output is not drained blocks on its next write
// once the pipe is full. The failure is logged once, and so is the recovery.
type criLog struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex // guards the fields below: lines of both streams never interleave
	f       *os.File
	buf     []byte
	failing bool // the last write failed
	lost    int  // entries lost since writes began to fail
}

func openCRILog(path string, log *slog.Logger) (*criLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	return &criLog{f: f, now: time.Now, log: log}, nil
}

// copy reads stream until EOF and writes each line as an entry. It returns
// nil at EOF, or the read error; write errors only lose entries.
func (l *criLog) copy(stream string, r io.Reader) error {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			l.write(stream, "F", line[:len(line)-1])
		case errors.Is(err, bufio.ErrBufferFull):
			l.write(stream, "P", line)
		default:
			if len(line) > 0 {
				l.write(stream, "P", line)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read %s: %w", stream, err)
		}
	}
}

// write writes one entry, or counts it lost.
func (l *criLog) write(stream, tag string, content []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[:0]
	b = l.now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, ' ')
	b = append(b, tag...)
	b = append(b, ' ')
	b = append(b, content...)
	b = append(b, '\n')
	l.buf = b
	_, err := l.f.Write(b)
	switch {
	case err != nil && !l.failing:
		l.failing, l.lost = true, 1
		l.log.Warn("cannot write container log, discarding output until it can",
			"path", l.f.Name(), "err", err)
	case err != nil:
		l.lost++
	case l.failing:
		l.failing = false
		l.log.Info("writing container log again", "path", l.f.Name(), "lost_entries", l.lost)
	}
}

func (l *criLog) Close() error {
	return l.f.Close()
}
