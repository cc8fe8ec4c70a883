package source

import (
	"bytes"
	"io"
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
// larger; the buffer never grows past limit+1, whatever the server says or
// sends.
func TestReadBody(t *testing.T) {
	const limit = 1 << 20
	for _, tc := range []struct {
		name     string
		r        io.Reader
		size     int64
		wantLen  int
		wantCap  int // 0: not checked
		wantFail bool
	}{
		{name: "empty", r: strings.NewReader(""), size: 0, wantLen: 0, wantCap: 1},
		{name: "announced", r: strings.NewReader("apiVersion: v1"), size: 14, wantLen: 14, wantCap: 15},
		{name: "unannounced", r: strings.NewReader("apiVersion: v1"), size: -1, wantLen: 14, wantCap: 64 << 10},
		{name: "at-the-limit", r: bytes.NewReader(make([]byte, limit)), size: -1, wantLen: limit, wantCap: limit + 1},
		{name: "one-byte-over", r: bytes.NewReader(make([]byte, limit+1)), size: -1, wantLen: limit + 1, wantCap: limit + 1},
		{name: "never-ends", r: endlessReader{}, size: -1, wantLen: limit + 1, wantCap: limit + 1},
		{name: "never-ends-a-byte-at-a-time", r: iotest.OneByteReader(io.LimitReader(endlessReader{}, 3*limit)), size: -1, wantLen: limit + 1, wantCap: limit + 1},
		{name: "announced-too-large", r: endlessReader{}, size: 50 * limit, wantLen: limit + 1, wantCap: limit + 1},
		{name: "read-fails", r: iotest.TimeoutReader(strings.NewReader("apiVersion: v1")), size: -1, wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readBody(tc.r, tc.size, limit)
			if tc.wantFail {
				if err == nil {
					t.Fatalf("no error, %d bytes", len(b))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tc.wantLen || tc.wantCap != 0 && cap(b) != tc.wantCap {
				t.Errorf("read %d bytes into %d, want %d into %d", len(b), cap(b), tc.wantLen, tc.wantCap)
			}
		})
	}
}
