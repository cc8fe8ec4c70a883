package agent

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffDoublesToCapAndResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBackoff(backoffInitial, time.Minute)
		key := backoffKey("u1", "a", "h")
		var got []time.Duration
		for range 6 {
			exit := time.Now()
			if until, _ := b.wait(key, exit, time.Now()); !until.IsZero() {
				time.Sleep(time.Until(until))
			}
			got = append(got, time.Since(exit))
			b.next(key, exit)
		}
		want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("waits = %v, want %v", got, want)
			}
		}
		// An exit more than 10 minutes after the last restart starts over.
		time.Sleep(10*time.Minute + time.Second)
		if until, _ := b.wait(key, time.Now(), time.Now()); !until.IsZero() {
			t.Error("still backing off after a 10 minute run")
		}
		b.next(key, time.Now())
		if _, d := b.wait(key, time.Now(), time.Now()); d != backoffInitial {
			t.Errorf("back-off after reset = %v, want %v", d, backoffInitial)
		}
	})
}
