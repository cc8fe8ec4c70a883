package source

import (
	"log/slog"
	"testing"
	"time"
)

// SetPeriod never blocks, and of several calls before Run takes one, the last wins.
func TestFileSetPeriodLastWins(t *testing.T) {
	f := NewFile(t.TempDir(), "node1", time.Hour, nil, slog.New(slog.DiscardHandler))
	f.SetPeriod(time.Second)
	f.SetPeriod(2 * time.Second)
	f.SetPeriod(0) // ignored
	f.SetPeriod(3 * time.Second)
	select {
	case d := <-f.periodc:
		if d != 3*time.Second {
			t.Errorf("Run would get %s, want 3s", d)
		}
	default:
		t.Fatal("no period for Run")
	}
	select {
	case d := <-f.periodc:
		t.Errorf("a second period %s is waiting", d)
	default:
	}
}
