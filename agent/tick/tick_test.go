package tick

import (
	"testing"
	"testing/synctest"
	"time"
)

// Tickers made at different times, whose periods divide one another, tick
// at the same instants, each at its own period.
func TestTickersShareInstants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ten := New(10 * time.Second)
		defer ten.Stop()
		time.Sleep(3 * time.Second)
		twenty := New(20 * time.Second)
		defer twenty.Stop()
		minute := New(time.Minute)
		defer minute.Stop()
		var tens, twenties, minutes []time.Time
		deadline := time.After(2 * time.Minute)
	loop:
		for {
			select {
			case at := <-ten.C:
				tens = append(tens, at)
			case at := <-twenty.C:
				twenties = append(twenties, at)
			case at := <-minute.C:
				minutes = append(minutes, at)
			case <-deadline:
				break loop
			}
		}
		// The first tick of each is at the next multiple, so 2 minutes hold
		// one more or not, depending on where the bubble's clock is.
		if len(tens) < 12 || len(tens) > 13 || len(twenties) < 6 || len(twenties) > 7 || len(minutes) < 2 || len(minutes) > 3 {
			t.Fatalf("in 2 minutes: %d ticks of 10s, %d of 20s, %d of 1m; want 12, 6, 2 (or one more)", len(tens), len(twenties), len(minutes))
		}
		on := map[time.Time]bool{}
		for i, at := range tens {
			on[at] = true
			if i > 0 && at.Sub(tens[i-1]) != 10*time.Second {
				t.Errorf("10s ticks %v apart", at.Sub(tens[i-1]))
			}
		}
		for _, at := range append(twenties, minutes...) {
			if !on[at] {
				t.Errorf("a tick at %v, not at one of the 10s ticker's instants", at)
			}
		}
	})
}

// After Stop nothing is delivered; Reset starts the ticks again at the new
// period.
func TestStopReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk := New(time.Second)
		time.Sleep(1500 * time.Millisecond) // one tick waits in C
		tk.Stop()
		time.Sleep(5 * time.Second)
		select {
		case <-tk.C:
			t.Fatal("a tick after Stop")
		default:
		}
		tk.Reset(10 * time.Second)
		defer tk.Stop()
		start := time.Now()
		<-tk.C
		if d := time.Since(start); d <= 0 || d > 10*time.Second {
			t.Errorf("first tick after Reset %v later, want within the period", d)
		}
		first := time.Now()
		<-tk.C
		if d := time.Since(first); d != 10*time.Second {
			t.Errorf("ticks %v apart, want 10s", d)
		}
	})
}
