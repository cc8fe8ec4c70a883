package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// tally counts pods by what the systemd STATUS line says of them. The
// Manager keeps one per key and their sum, so that a change of one pod costs
// the STATUS line that pod's work, not every pod's.
type tally struct {
	pods, running, pending, succeeded, failed int
	waiting                                   []string // "name: reason"
}

// add counts pod p (node: the suffix its static pod name carries).
func (t *tally) add(p *v1.Pod, node string) {
	t.pods++
	c := Classify(p)
	if c.Waiting != "" {
		t.waiting = append(t.waiting, strings.TrimSuffix(p.Name, "-"+node)+": "+c.Waiting)
		return
	}
	switch c.Phase {
	case v1.PodRunning:
		t.running++
	case v1.PodSucceeded:
		t.succeeded++
	case v1.PodFailed:
		t.failed++
	default:
		t.pending++
	}
}

// addCounts adds (sign 1) or takes away (sign -1) o's counts; the waiting
// pods are kept per key, not summed.
func (t *tally) addCounts(o tally, sign int) {
	t.pods += sign * o.pods
	t.running += sign * o.running
	t.pending += sign * o.pending
	t.succeeded += sign * o.succeeded
	t.failed += sign * o.failed
}

// Summarize is the one-line STATUS for systemd of pods counted afresh:
// "3 pods: 2 running, 1 waiting (etcd: CrashLoopBackOff)". The Manager
// keeps it by increments instead; a full count is their oracle.
func Summarize(pods []v1.Pod, node string, problems int) string {
	var t tally
	for i := range pods {
		t.add(&pods[i], node)
	}
	return t.line(t.waiting, problems)
}

// line is the STATUS line of t's counts, with the waiting pods named in
// order.
func (t *tally) line(waiting []string, problems int) string {
	noun := "pods"
	if t.pods == 1 {
		noun = "pod"
	}
	s := fmt.Sprintf("%d %s", t.pods, noun)
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(t.running, "running")
	if len(waiting) > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting (%s)", len(waiting), strings.Join(waiting, ", ")))
	}
	add(t.pending, "pending")
	add(t.succeeded, "succeeded")
	add(t.failed, "failed")
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	switch {
	case problems == 1:
		s += "; 1 manifest problem"
	case problems > 1:
		s += fmt.Sprintf("; %d manifest problems", problems)
	}
	return s
}
