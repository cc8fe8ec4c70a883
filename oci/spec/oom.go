package spec

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// WithOOMScoreAdj sets the container processes' oom_score_adj; nil leaves it
// unset, so they inherit the runtime's own.
func WithOOMScoreAdj(adj *int) SpecOpt {
	return func(s *specs.Spec) error {
		if adj == nil {
			s.Process.OOMScoreAdj = nil
			return nil
		}
		if *adj < -1000 || *adj > 1000 {
			return fmt.Errorf("oom_score_adj %d: out of range -1000..1000", *adj)
		}
		v := *adj
		s.Process.OOMScoreAdj = &v
		return nil
	}
}
