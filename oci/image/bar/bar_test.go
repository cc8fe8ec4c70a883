package bar

import (
	"bytes"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/oci/image"
)

// Off a terminal, the line says what, the layers, the bytes of the total and
// the rate since the step began; before any progress, that it waits.
func TestLine(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "pull example.com/app:v2")
	defer b.Done()
	start := b.phaseStart
	if got, want := b.line(start.Add(5*time.Second)), "pull example.com/app:v2: waiting, 5s"; got != want {
		t.Errorf("before any progress: %q, want %q", got, want)
	}
	b.Update(image.Progress{Layers: 3, LayersDone: 1, Bytes: 40 << 20, BytesDone: 12 << 20})
	if got, want := b.line(b.phaseStart.Add(5*time.Second)), "pull example.com/app:v2 1/3 layers: 12.0 MiB of 40.0 MiB, 2.4 MiB/s"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	b.Update(image.Progress{Phase: "unpacking", Layers: 2, BytesDone: 3 << 20})
	if got, want := b.line(b.phaseStart.Add(2*time.Second)), "pull example.com/app:v2 (unpacking) 0/2 layers: 3.0 MiB, 1.5 MiB/s"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if out.Len() != 0 {
		t.Errorf("wrote before a period passed: %q", out.String())
	}
}

// Done stops the lines, and may be called twice.
func TestDoneStops(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "import -")
	b.Done()
	b.Done()
	select {
	case <-b.stopped:
	default:
		t.Fatal("the line writer still runs after Done")
	}
}
