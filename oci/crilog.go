package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
type criLog struct {
	mu  sync.Mutex // guards f and buf: lines of both streams never interleave
	f   *os.File
	buf []byte
	now func() time.Time
}

func openCRILog(path string) (*criLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	return &criLog{f: f, now: time.Now}, nil
}

// copy reads stream until EOF and writes each line as an entry; it returns
// the first write error, or nil at EOF.
func (l *criLog) copy(stream string, r io.Reader) error {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if werr := l.write(stream, "F", line[:len(line)-1]); werr != nil {
				return werr
			}
		case errors.Is(err, bufio.ErrBufferFull):
			if werr := l.write(stream, "P", line); werr != nil {
				return werr
			}
		default:
			if len(line) > 0 {
				if werr := l.write(stream, "P", line); werr != nil {
					return werr
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read %s: %w", stream, err)
		}
	}
}

func (l *criLog) write(stream, tag string, content []byte) error {
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
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("write log %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *criLog) Close() error {
	return l.f.Close()
}
