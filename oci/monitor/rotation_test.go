package monitor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A rotation file holds its limits in a fixed form, the one monitor.c reads:
// maxSize then maxFiles, little-endian int64s, nothing else.
func TestRotationFixedForm(t *testing.T) {
	for _, rot := range []LogRotation{{}, {MaxSize: 10 << 20, MaxFiles: 5}, {MaxSize: -1, MaxFiles: -1}, {MaxSize: 1<<62 + 3, MaxFiles: maxRotationFiles}} {
		b := EncodeRotation(rot)
		if len(b) != RotationSize {
			t.Fatalf("%+v encoded in %d bytes", rot, len(b))
		}
		if got, err := DecodeRotation(b); err != nil || got != rot {
			t.Errorf("%+v read back as %+v, %v", rot, got, err)
		}
	}
	if got := EncodeRotation(LogRotation{MaxSize: 0x0102, MaxFiles: 3}); !bytes.Equal(got, []byte{2, 1, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("encoded % x, want little-endian maxSize then maxFiles", got)
	}
	for _, bad := range [][]byte{nil, []byte(`{"maxSize":1024,"maxFiles":2}`), make([]byte, RotationSize-1), make([]byte, RotationSize+1),
		EncodeRotation(LogRotation{MaxFiles: maxRotationFiles + 1}), EncodeRotation(LogRotation{MaxFiles: -maxRotationFiles - 1})} {
		if rot, err := DecodeRotation(bad); err == nil {
			t.Errorf("%q read as %+v, want an error", bad, rot)
		}
	}

	path := filepath.Join(t.TempDir(), RotationFile)
	if _, ok, err := ReadRotation(path); ok || err != nil {
		t.Errorf("a missing rotation file: ok %v, %v; want neither", ok, err)
	}
	want := LogRotation{MaxSize: 4096, MaxFiles: 3}
	if err := WriteRotation(path, want); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := ReadRotation(path); !ok || err != nil || got != want {
		t.Errorf("read back %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if err := os.WriteFile(path, []byte("not json at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadRotation(path); ok || err == nil {
		t.Errorf("garbage: ok %v, %v; want an error", ok, err)
	}
}
