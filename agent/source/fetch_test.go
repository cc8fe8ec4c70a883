package source

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// endlessReader is a body that never ends.
type endlessReader struct{}

func (endlessReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// The body is read whole up to the limit, and one byte past it says it is
// larger, whatever the server says or sends; what is read is all there, in
// order, and no larger than it.
func TestReadBody(t *testing.T) {
	const limit = 3*bodyChunk + 100
	seq := make([]byte, limit)
	for i := range seq {
		seq[i] = byte(i % 251)
	}
	for _, tc := range []struct {
		name   string
		r      io.Reader
		size   int64
		want   []byte // nil: larger or failed
		larger bool
		fail   bool
	}{
		{name: "empty", r: strings.NewReader(""), size: 0, want: []byte{}},
		{name: "empty-unannounced", r: strings.NewReader(""), size: -1, want: []byte{}},
		{name: "announced", r: strings.NewReader("apiVersion: v1"), size: 14, want: []byte("apiVersion: v1")},
		{name: "unannounced", r: strings.NewReader("apiVersion: v1"), size: -1, want: []byte("apiVersion: v1")},
		{name: "at-the-limit", r: bytes.NewReader(seq), size: -1, want: seq},
		{name: "at-the-limit-announced", r: bytes.NewReader(seq), size: limit, want: seq},
		{name: "at-the-limit-a-byte-at-a-time", r: iotest.OneByteReader(bytes.NewReader(seq)), size: -1, want: seq},
		{name: "chunk-sized", r: bytes.NewReader(seq[:bodyChunk+64<<10]), size: -1, want: seq[:bodyChunk+64<<10]},
		{name: "one-byte-over", r: bytes.NewReader(append(bytes.Clone(seq), 'x')), size: -1, larger: true},
		{name: "never-ends", r: endlessReader{}, size: -1, larger: true},
		{name: "announced-too-large", r: endlessReader{}, size: 50 * limit, larger: true},
		{name: "more-than-announced", r: strings.NewReader("apiVersion: v1"), size: 3, fail: true},
		{name: "read-fails", r: iotest.TimeoutReader(strings.NewReader("apiVersion: v1")), size: -1, fail: true},
		{name: "truncated", r: io.MultiReader(strings.NewReader("apiVersion"), iotest.ErrReader(io.ErrUnexpectedEOF)), size: 14, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, larger, err := readBody(tc.r, tc.size, limit)
			if tc.fail {
				if err == nil {
					t.Fatalf("no error, %d bytes", len(b))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if larger != tc.larger || !bytes.Equal(b, tc.want) || tc.want == nil && b != nil {
				t.Errorf("read %d bytes, larger %v; want %d, %v", len(b), larger, len(tc.want), tc.larger)
			}
			if cap(b) > len(b)+1 {
				t.Errorf("%d bytes in a buffer of %d", len(b), cap(b))
			}
		})
	}
}

// A body that never ends costs the limit and a byte, read in chunks, and
// nothing more.
func TestReadBodyAllocations(t *testing.T) {
	const limit = 10 << 20
	var before, after runtimeMem
	before.read()
	if _, larger, err := readBody(endlessReader{}, -1, limit); err != nil || !larger {
		t.Fatalf("larger %v, err %v", larger, err)
	}
	after.read()
	if got := after.total - before.total; got > limit+limit/8 {
		t.Errorf("reading a body that never ends allocated %d bytes, want about %d", got, limit+1)
	}
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}
