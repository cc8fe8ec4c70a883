package spec

import (
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// noFloor lets any oom_score_adj through, as CAP_SYS_RESOURCE does.
func noFloor(t *testing.T) {
	old := oomFloor
	oomFloor = func() int { return -1000 }
	t.Cleanup(func() { oomFloor = old })
}

func TestWithOOMScoreAdj(t *testing.T) {
	noFloor(t)
	adj := func(v int) *int { return &v }
	tests := []struct {
		name    string
		adj     *int
		wantErr string
	}{
		{name: "unset inherits"},
		{name: "guaranteed", adj: adj(-997)},
		{name: "best effort", adj: adj(1000)},
		{name: "burstable", adj: adj(938)},
		{name: "zero", adj: adj(0)},
		{name: "too low", adj: adj(-1001), wantErr: "oom_score_adj -1001"},
		{name: "too high", adj: adj(1001), wantErr: "oom_score_adj 1001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			s.Process.OOMScoreAdj = adj(5)
			err := WithOOMScoreAdj(tt.adj)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			got := s.Process.OOMScoreAdj
			switch {
			case tt.adj == nil && got != nil:
				t.Errorf("oomScoreAdj = %d, want unset", *got)
			case tt.adj != nil && (got == nil || *got != *tt.adj):
				t.Errorf("oomScoreAdj = %v, want %d", got, *tt.adj)
			case tt.adj != nil && got == tt.adj:
				t.Error("spec shares the caller's pointer")
			}
		})
	}
}

// Without CAP_SYS_RESOURCE a container may not go below the runtime's own
// oom_score_adj: asking for it would fail the start.
func TestWithOOMScoreAdjClampedToFloor(t *testing.T) {
	old := oomFloor
	oomFloor = func() int { return -999 }
	t.Cleanup(func() { oomFloor = old })
	for _, tt := range []struct{ adj, want int }{{-997, -997}, {-1000, -999}, {1000, 1000}} {
		s := Default()
		if err := WithOOMScoreAdj(&tt.adj)(s); err != nil {
			t.Fatal(err)
		}
		if *s.Process.OOMScoreAdj != tt.want {
			t.Errorf("asked %d with floor -999: got %d, want %d", tt.adj, *s.Process.OOMScoreAdj, tt.want)
		}
	}
	oomFloor = func() int { return 0 }
	adj := -997
	s := Default()
	WithOOMScoreAdj(&adj)(s)
	if *s.Process.OOMScoreAdj != 0 {
		t.Errorf("asked -997 with floor 0: got %d, want 0", *s.Process.OOMScoreAdj)
	}
}

func TestGenerateOOMScoreAdj(t *testing.T) {
	noFloor(t)
	adj := -997
	s, err := Generate(testPod(), &podspec.Container{Name: "app", OOMScoreAdj: &adj}, busybox, t.TempDir(), testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != -997 {
		t.Errorf("oomScoreAdj = %v, want -997", s.Process.OOMScoreAdj)
	}
}
