// Package eviction decides, the kubelet's way (pkg/kubelet/eviction), when the
// node is under pressure and which pod to evict: signals observed from the
// runtime's stats, hard and soft thresholds with grace periods and minimum
// reclaim, node conditions held for the pressure transition period, and the
// kubelet's ranking of pods. It is pure: the agent feeds it stats and the
// time, and acts on what it decides.
package eviction

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, named as the kubelet's.
type Signal string

// The signals staticpodd observes (the kubelet's, less containerfs, which is
// nodefs here).
const (
	MemoryAvailable            Signal = "memory.available"
	AllocatableMemoryAvailable Signal = "allocatableMemory.available"
	NodeFsAvailable            Signal = "nodefs.available"
	NodeFsInodesFree           Signal = "nodefs.inodesFree"
	ImageFsAvailable           Signal = "imagefs.available"
	ImageFsInodesFree          Signal = "imagefs.inodesFree"
	PIDAvailable               Signal = "pid.available"
)

// Signals lists every signal, in the order the kubelet ranks them when several
// are met (memory first, then disk, then pids).
var Signals = []Signal{MemoryAvailable, AllocatableMemoryAvailable, NodeFsAvailable, NodeFsInodesFree,
	ImageFsAvailable, ImageFsInodesFree, PIDAvailable}

// Resources that a signal starves, as the kubelet names them in messages.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePids   v1.ResourceName = "pids"
)

var signalToResource = map[Signal]v1.ResourceName{
	MemoryAvailable:            v1.ResourceMemory,
	AllocatableMemoryAvailable: v1.ResourceMemory,
	NodeFsAvailable:            v1.ResourceEphemeralStorage,
	NodeFsInodesFree:           resourceInodes,
	ImageFsAvailable:           v1.ResourceEphemeralStorage,
	ImageFsInodesFree:          resourceInodes,
	PIDAvailable:               resourcePids,
}

var signalToCondition = map[Signal]v1.NodeConditionType{
	MemoryAvailable:            v1.NodeMemoryPressure,
	AllocatableMemoryAvailable: v1.NodeMemoryPressure,
	NodeFsAvailable:            v1.NodeDiskPressure,
	NodeFsInodesFree:           v1.NodeDiskPressure,
	ImageFsAvailable:           v1.NodeDiskPressure,
	ImageFsInodesFree:          v1.NodeDiskPressure,
	PIDAvailable:               v1.NodePIDPressure,
}

// Value is a threshold as a quantity or a fraction of capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float32 // 0.1 for "10%"
}

// Of is the value for a capacity (evictionapi.GetThresholdQuantity).
func (v Value) Of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(v.Percentage) * float64(capacity))
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(float64(v.Percentage)*100, 'f', -1, 32) + "%"
}

// Threshold is one eviction threshold: the signal is met when what is
// available falls below Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is how long a soft threshold must be met before it
	// evicts; a hard threshold has none.
	GracePeriod time.Duration
	Soft        bool
	// MinReclaim: once met, the threshold stays met until this much more
	// than Value is available.
	MinReclaim *Value
}

// key is all that t says, for comparing thresholds of two parses.
func (t Threshold) key() string {
	k := fmt.Sprintf("%s %s %v", t.String(), t.GracePeriod, t.MinReclaim != nil)
	if t.MinReclaim != nil {
		k += " " + t.MinReclaim.String()
	}
	return k
}

func (t Threshold) String() string {
	kind := "hard"
	if t.Soft {
		kind = "soft"
	}
	return fmt.Sprintf("%s %s<%s", kind, t.Signal, t.Value)
}

// Parse reads the evictionHard, evictionSoft, evictionSoftGracePeriod and
// evictionMinimumReclaim maps (ParseThresholdConfig), and adds
// allocatableMemory.available as a copy of a hard memory.available, as the
// kubelet does with its default enforceNodeAllocatable of pods. Errors name the
// field and the signal.
func Parse(hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	var errs []error
	var out []Threshold
	parse := func(field string, m map[string]string, isSoft bool) {
		for _, sig := range slices.Sorted(mapKeys(m)) {
			t, err := parseStatement(Signal(sig), m[sig])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", field, sig, err))
				continue
			}
			if t == nil {
				continue
			}
			t.Soft = isSoft
			if isSoft {
				g, ok := softGrace[sig]
				if !ok {
					errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: %s: grace period must be specified for the soft eviction threshold %s", sig, sig))
					continue
				}
				d, err := time.ParseDuration(g)
				if err != nil || d < 0 {
					errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: %s: %q is not a positive duration", sig, g))
					continue
				}
				t.GracePeriod = d
			}
			out = append(out, *t)
		}
	}
	parse("evictionHard", hard, false)
	parse("evictionSoft", soft, true)
	for _, sig := range slices.Sorted(mapKeys(softGrace)) {
		if !valid(Signal(sig)) {
			errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: unsupported eviction signal %s", sig))
		}
	}
	for _, sig := range slices.Sorted(mapKeys(minReclaim)) {
		v, err := parseMinReclaim(Signal(sig), minReclaim[sig])
		if err != nil {
			errs = append(errs, fmt.Errorf("evictionMinimumReclaim: %s: %w", sig, err))
			continue
		}
		for i := range out {
			if out[i].Signal == Signal(sig) {
				out[i].MinReclaim = &v
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var alloc []Threshold
	for _, t := range out {
		if t.Signal == MemoryAvailable && !t.Soft {
			alloc = append(alloc, Threshold{Signal: AllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
		}
	}
	return append(out, alloc...), nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func valid(s Signal) bool { _, ok := signalToResource[s]; return ok && s != AllocatableMemoryAvailable }

// parseStatement is the kubelet's parseThresholdStatement: nil for 0% and
// 100%, which it ignores.
func parseStatement(sig Signal, val string) (*Threshold, error) {
	if !valid(sig) {
		return nil, fmt.Errorf("unsupported eviction signal %s", sig)
	}
	if strings.HasSuffix(val, "%") {
		if val == "0%" || val == "100%" {
			return nil, nil
		}
		p, err := parsePercentage(val)
		if err != nil {
			return nil, err
		}
		if p < 0 || p > 1 {
			return nil, fmt.Errorf("eviction percentage threshold %s must be between 0%% and 100%%: %s", sig, val)
		}
		return &Threshold{Signal: sig, Value: Value{Percentage: p}}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", val, err)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("eviction threshold %s must be positive: %s", sig, &q)
	}
	return &Threshold{Signal: sig, Value: Value{Quantity: &q}}, nil
}

func parseMinReclaim(sig Signal, val string) (Value, error) {
	if !valid(sig) {
		return Value{}, fmt.Errorf("unsupported eviction signal %s", sig)
	}
	if strings.HasSuffix(val, "%") {
		p, err := parsePercentage(val)
		if err != nil {
			return Value{}, err
		}
		if p <= 0 {
			return Value{}, fmt.Errorf("eviction percentage minimum reclaim %s must be positive: %s", sig, val)
		}
		return Value{Percentage: p}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return Value{}, fmt.Errorf("%q: %w", val, err)
	}
	if q.Sign() < 0 {
		return Value{}, fmt.Errorf("negative eviction minimum reclaim specified for %s", sig)
	}
	return Value{Quantity: &q}, nil
}

func parsePercentage(s string) (float32, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	return float32(v) / 100, nil
}
