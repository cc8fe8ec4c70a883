package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// progressLog keeps every Progress a transfer reported.
type progressLog []Progress

func (l *progressLog) add(p Progress) { *l = append(*l, p) }

func (l progressLog) last(t *testing.T) Progress {
	t.Helper()
	if len(l) == 0 {
		t.Fatal("no progress reported")
	}
	return l[len(l)-1]
}

// phases are the phases reported, in order, each once.
func (l progressLog) phases() []string {
	var ph []string
	for _, p := range l {
		if len(ph) == 0 || ph[len(ph)-1] != p.Phase {
			ph = append(ph, p.Phase)
		}
	}
	return ph
}

// TestImportReportsProgress: an import of a gzip'd archive tells how far it
// got: the archive's bytes while it is decompressed, then every layer it
// unpacks; one of an archive whose layers the store has unpacks none.
func TestImportReportsProgress(t *testing.T) {
	testroot.Require(t)
	three := testImage(t, baseEntries, topEntries, []entry{{name: "third.txt", body: "3"}})
	p := filepath.Join(t.TempDir(), "image.tar.gz")
	writeDockerArchive(t, p, map[string]v1.Image{"example.com/progress:1": three})
	compress(t, p, "gzip")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	var log progressLog
	if _, err := s.Import(context.Background(), p, WithProgress(log.add, 0)); err != nil {
		t.Fatal(err)
	}
	if got := log.phases(); len(got) != 2 || got[0] != "decompressing" || got[1] != "unpacking" {
		t.Errorf("phases %q, want decompressing then unpacking", got)
	}
	var dec Progress
	for _, pr := range log {
		if pr.Phase == "decompressing" {
			dec = pr
		}
	}
	if dec.Bytes != fi.Size() || dec.BytesDone != fi.Size() {
		t.Errorf("decompressing: %d of %d bytes at its end, want all %d of the archive", dec.BytesDone, dec.Bytes, fi.Size())
	}
	end := log.last(t)
	if end.Layers != 3 || end.LayersDone != 3 || end.BytesDone == 0 {
		t.Errorf("at the end: %+v, want 3 of 3 layers and their bytes", end)
	}
	for i := 1; i < len(log); i++ {
		if log[i].Phase == log[i-1].Phase && (log[i].LayersDone < log[i-1].LayersDone || log[i].BytesDone < log[i-1].BytesDone) {
			t.Errorf("progress went back: %+v after %+v", log[i], log[i-1])
		}
	}

	// Again: every layer is in the store, none is unpacked.
	var again progressLog
	if _, err := s.Import(context.Background(), p, WithProgress(again.add, 0)); err != nil {
		t.Fatal(err)
	}
	if end := again.last(t); end.Layers != 0 || end.LayersDone != 0 {
		t.Errorf("a second import: %+v, want no layer to unpack", end)
	}
}

// TestImportReaderReportsProgress: a stream's bytes are counted as read.
func TestImportReaderReportsProgress(t *testing.T) {
	testroot.Require(t)
	p := filepath.Join(t.TempDir(), "image.tar")
	writeOCIArchive(t, p, map[string]v1.Image{"example.com/progress:2": testImage(t)})
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var log progressLog
	if _, err := openStore(t).ImportReader(context.Background(), bytes.NewReader(b), WithProgress(log.add, 0)); err != nil {
		t.Fatal(err)
	}
	var read Progress
	for _, pr := range log {
		if pr.Phase == "reading" {
			read = pr
		}
	}
	if read.BytesDone != int64(len(b)) {
		t.Errorf("reading: %d bytes at its end, want the stream's %d", read.BytesDone, len(b))
	}
	if end := log.last(t); end.Phase != "unpacking" || end.Layers != 2 || end.LayersDone != 2 {
		t.Errorf("at the end: %+v, want 2 of 2 layers unpacked", end)
	}
}

// TestExportReportsProgress: an export counts the bytes it writes, up to
// what it wrote, and every layer.
func TestExportReportsProgress(t *testing.T) {
	testroot.Require(t)
	p := filepath.Join(t.TempDir(), "image.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"example.com/progress:3": testImage(t)})
	s := openStore(t)
	if _, err := s.Import(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var log progressLog
	var out bytes.Buffer
	if err := s.Export(context.Background(), &out, []string{"example.com/progress:3"}, WithProgress(log.add, 0)); err != nil {
		t.Fatal(err)
	}
	first, end := log[0], log.last(t)
	if first.Layers != 2 || first.Bytes == 0 || first.BytesDone != 0 {
		t.Errorf("at the start: %+v, want 2 layers, their size, nothing done", first)
	}
	if end.LayersDone != 2 {
		t.Errorf("at the end: %+v, want 2 of 2 layers", end)
	}
	// BytesDone is capped at the estimate (the layers' files, not their
	// tars): all of it is done once the export is.
	if end.BytesDone != min(int64(out.Len()), end.Bytes) {
		t.Errorf("at the end %d bytes done of %d, the export wrote %d", end.BytesDone, end.Bytes, out.Len())
	}
}
