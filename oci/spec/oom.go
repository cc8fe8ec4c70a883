package spec

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// WithOOMScoreAdj sets the container processes' oom_score_adj; nil leaves it
// unset, so they inherit the runtime's own. A value below what this process may
// give (oomFloor) is raised to it, as rlimits are clamped: asking for less fails
// the container's start ("failed to update /proc/self/oom_score_adj").
func WithOOMScoreAdj(adj *int) SpecOpt {
	return func(s *specs.Spec) error {
		if adj == nil {
			s.Process.OOMScoreAdj = nil
			return nil
		}
		if *adj < -1000 || *adj > 1000 {
			return fmt.Errorf("oom_score_adj %d: out of range -1000..1000", *adj)
		}
		v := max(*adj, oomFloor())
		s.Process.OOMScoreAdj = &v
		return nil
	}
}

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/self/status CapEff.
const capSysResource = 24

// oomFloor is the lowest oom_score_adj a child of this process may set. Without
// CAP_SYS_RESOURCE the kernel refuses values below the one a privileged process
// last set (oom_score_adj_min), which is not readable: this process's own value
// stands for it. Under systemd that is the unit's OOMScoreAdjust (-999), so the
// kubelet's -997 for Guaranteed pods goes through; a daemon started by hand at 0
// gives its containers at least 0. A variable for tests.
var oomFloor = func() int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1000
	}
	for _, line := range strings.Split(string(status), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err == nil && caps&(1<<capSysResource) != 0 {
				return -1000
			}
		}
	}
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return -1000
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(own)))
	if err != nil {
		return -1000
	}
	return v
}
