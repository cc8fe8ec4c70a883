package histogram

import "testing"

func TestHistogram(t *testing.T) {
	h := New([]float64{1, 2, 5})
	for _, v := range []float64{0.5, 1, 1.5, 4, 9} {
		h.Observe(v)
	}
	s := h.Snapshot()
	if s.Count != 5 || s.Sum != 16 {
		t.Errorf("count %d sum %v", s.Count, s.Sum)
	}
	// Cumulative, bounds inclusive: 0.5 and 1 are <= 1.
	for b, want := range map[float64]uint64{1: 2, 2: 3, 5: 4} {
		if s.Buckets[b] != want {
			t.Errorf("bucket le=%v: %d, want %d", b, s.Buckets[b], want)
		}
	}
}
