package spec

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/moby/sys/capability"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// WithCapabilities sets the bounding, effective and permitted sets to caps, and
// leaves inheritable and ambient empty (as containerd: a non-root process must not
// regain capabilities through exec).
func WithCapabilities(caps []string) SpecOpt {
	return func(s *specs.Spec) error {
		setCaps(s, slices.Clone(caps))
		return nil
	}
}

func setCaps(s *specs.Spec, caps []string) {
	if caps == nil {
		caps = []string{}
	}
	s.Process.Capabilities = &specs.LinuxCapabilities{
		Bounding:  caps,
		Effective: slices.Clone(caps),
		Permitted: slices.Clone(caps),
	}
}

// WithCapabilityChanges applies securityContext.capabilities add and drop, as
// containerd's CRI plugin: "ALL" in add grants every capability this process has,
// "ALL" in drop removes all, then single names are added, then single names
// dropped. Names are case-insensitive, with or without the CAP_ prefix.
func WithCapabilityChanges(add, drop []string) SpecOpt {
	return func(s *specs.Spec) error {
		addCaps, addAll, err := normalizeCaps(add)
		if err != nil {
			return fmt.Errorf("capabilities.add: %w", err)
		}
		dropCaps, dropAll, err := normalizeCaps(drop)
		if err != nil {
			return fmt.Errorf("capabilities.drop: %w", err)
		}
		var caps []string
		if s.Process.Capabilities != nil {
			caps = slices.Clone(s.Process.Capabilities.Bounding)
		}
		if addAll {
			all, err := currentCaps()
			if err != nil {
				return fmt.Errorf("capabilities.add ALL: %w", err)
			}
			caps = all
		}
		if dropAll {
			caps = nil
		}
		for _, c := range addCaps {
			if !slices.Contains(caps, c) {
				caps = append(caps, c)
			}
		}
		caps = slices.DeleteFunc(caps, func(c string) bool { return slices.Contains(dropCaps, c) })
		setCaps(s, caps)
		return nil
	}
}

// normalizeCaps turns names into CAP_XXX, checking each is a capability, and
// reports whether "ALL" was among them.
func normalizeCaps(names []string) (caps []string, all bool, err error) {
	known := knownCaps()
	for _, n := range names {
		c := strings.ToUpper(strings.TrimSpace(n))
		if c == "ALL" {
			all = true
			continue
		}
		if !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		if !known[c] {
			return nil, false, fmt.Errorf("unknown capability %q", n)
		}
		caps = append(caps, c)
	}
	return caps, all, nil
}

var knownCaps = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, c := range capability.ListKnown() {
		m[capName(c)] = true
	}
	return m
})

func capName(c capability.Cap) string { return "CAP_" + strings.ToUpper(c.String()) }

// currentCaps lists the capabilities of this process's effective set: all a
// container can be given (containerd's cap.Current). Asking for one the runtime
// lacks makes the container fail to start.
func currentCaps() ([]string, error) {
	p, err := capability.NewPid2(0)
	if err != nil {
		return nil, fmt.Errorf("read own capabilities: %w", err)
	}
	if err := p.Load(); err != nil {
		return nil, fmt.Errorf("read own capabilities: %w", err)
	}
	var caps []string
	for _, c := range capability.ListKnown() {
		if p.Get(capability.EFFECTIVE, c) {
			caps = append(caps, capName(c))
		}
	}
	return caps, nil
}
