package image

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstd's decoder reads the archive from a goroutine of its own, from its
// start (a small archive: to its end at once; a large one: past the
// reader's first buffer), while decompressed is still telling the meter
// what the compression check read. Every byte of the archive is counted
// once, with no data race (go test -race flagged one on the reader's count
// and meter before they were guarded).
func TestDecompressedCountsEveryArchiveByteOnce(t *testing.T) {
	for _, size := range []int{100, 3 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) { testDecompressedCounts(t, size) })
	}
}

func testDecompressedCounts(t *testing.T, size int) {
	dir := t.TempDir()
	raw := make([]byte, size)
	rand.Read(raw)
	var zbuf bytes.Buffer
	zw, err := zstd.NewWriter(&zbuf)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(raw)
	zw.Close()
	p := filepath.Join(dir, "image.tar.zst")
	if err := os.WriteFile(p, zbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		var mu sync.Mutex
		var last Progress
		m := newMeter(transferOptions{progress: func(p Progress) { mu.Lock(); last = p; mu.Unlock() }})
		staging := t.TempDir()
		out, err := decompressed(p, staging, nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("decompressed copy differs from what was compressed (%v)", err)
		}
		m.report(true)
		mu.Lock()
		done := last.BytesDone
		mu.Unlock()
		if done != int64(zbuf.Len()) {
			t.Errorf("the meter counted %d bytes of a %d-byte archive", done, zbuf.Len())
		}
	}
}
