package spec

import (
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestWithOOMScoreAdj(t *testing.T) {
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

func TestGenerateOOMScoreAdj(t *testing.T) {
	adj := -997
	s, err := Generate(testPod(), &podspec.Container{Name: "app", OOMScoreAdj: &adj}, busybox, t.TempDir(), testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != -997 {
		t.Errorf("oomScoreAdj = %v, want -997", s.Process.OOMScoreAdj)
	}
}
