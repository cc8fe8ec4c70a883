// Package host is the one home of the facts about the node that the agent and
// the runtime both read from the kernel: its memory (/proc/meminfo) and its
// kernel release (uname). It links the standard library and x/sys/unix only,
// so that oci/ may import it too (tests/deps_test.go).
package host

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Meminfo is the kernel's file of memory facts.
const Meminfo = "/proc/meminfo"

// Memory is what a meminfo file says of the node's memory, in bytes.
type Memory struct {
	// Total is MemTotal: the machine memory capacity cAdvisor reports to the
	// kubelet. Never 0 when ReadMemory returns no error.
	Total uint64
	// Free is MemFree, 0 when the file has no such line.
	Free uint64
	// Available is MemAvailable, 0 when the file has no such line (kernels
	// before 3.14).
	Available uint64
}

// maxKB is the largest value in kB whose bytes still fit an int64, which is
// how the Kubernetes side counts them.
const maxKB = math.MaxInt64 / 1024

// ReadMemory reads and parses the meminfo file at path ("" is Meminfo), once.
// Lines are "Key: value kB"; of the keys it knows, the first line of each
// counts, a bare number is taken as kB as the kernel writes these, and a
// line that is not a count of kB is an error. A file without MemTotal (or
// with MemTotal 0) is an error. A read error is returned as it is, naming the
// file.
func ReadMemory(path string) (Memory, error) {
	if path == "" {
		path = Meminfo
	}
	buf := readBufs.Get().(*[]byte)
	defer readBufs.Put(buf)
	data, err := readAll(path, (*buf)[:0])
	if cap(data) <= readBufMax {
		*buf = data // grown, if it had to, and small enough to keep
	}
	if err != nil {
		return Memory{}, err
	}
	return parseMemory(path, data)
}

// readBufMax is the most of a buffer ReadMemory keeps for its next read:
// the kernel's meminfo is about 1.5 KiB.
const readBufMax = 16 << 10

// readBufs are ReadMemory's buffers: the eviction manager's housekeeping
// reads meminfo every 10 s, and a buffer, a copy as a string and a slice of
// its lines each time were most of what it allocated.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// readAll reads the file at path into buf, grown as it must be, as
// os.ReadFile does.
func readAll(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return buf, err
		}
	}
}

// parseMemory parses data in place: lines as strings.Split(data, "\n")
// gives them, fields as strings.Fields splits them.
func parseMemory(path string, data []byte) (Memory, error) {
	var m Memory
	var seen [3]bool
	for more := true; more; {
		var line []byte
		line, data, more = bytes.Cut(data, []byte{'\n'})
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var k int
		var dst *uint64
		switch string(key) {
		case "MemTotal":
			k, dst = 0, &m.Total
		case "MemFree":
			k, dst = 1, &m.Free
		case "MemAvailable":
			k, dst = 2, &m.Available
		default:
			continue
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		f0, rest := NextField(rest)
		f1, rest := NextField(rest)
		f2, _ := NextField(rest)
		if f0 == nil || f2 != nil || (f1 != nil && string(f1) != "kB") {
			return Memory{}, fmt.Errorf("%s: bad %s line %q", path, key, line)
		}
		kb, err := strconv.ParseUint(string(f0), 10, 64)
		if err != nil || kb > maxKB || (k == 0 && kb == 0) {
			return Memory{}, fmt.Errorf("%s: bad %s line %q", path, key, line)
		}
		*dst = kb * 1024
	}
	if !seen[0] {
		return Memory{}, errors.New(path + ": no MemTotal")
	}
	return m, nil
}

// NextField is the first of the fields strings.Fields would split b into
// (runs of what unicode.IsSpace calls space) and what follows it; nil when
// b holds no more.
func NextField(b []byte) (field, rest []byte) {
	start := -1
	for i := 0; i < len(b); {
		c, size := rune(b[i]), 1
		if c >= utf8.RuneSelf {
			c, size = utf8.DecodeRune(b[i:])
		}
		space := unicode.IsSpace(c)
		if start < 0 && !space {
			start = i
		} else if start >= 0 && space {
			return b[start:i], b[i:]
		}
		i += size
	}
	if start < 0 {
		return nil, nil
	}
	return b[start:], nil
}
