package status

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's words for a pod restarting all its containers in place
// (RestartAllContainersOnContainerExits): the reason and message of a
// container removed for it, and the reason and message of the pod's
// AllContainersRestarting condition while it does.
const (
	RestartingAllContainers        = "RestartingAllContainers"
	RestartingAllContainersMessage = "The container is removed because RestartAllContainers in place"
	restartAllContainersStarted    = "RestartAllContainersStarted"
	restartAllContainersMessage    = "container exited with restart policy rule"
	// RestartAllExitCode is the exit code the kubelet shows as the last
	// termination of a container removed to restart all.
	RestartAllExitCode = 137
)

// MatchingRule is the first of c's restartPolicyRules that exitCode
// matches (podutil.FindMatchingContainerRestartRule).
func MatchingRule(c *v1.Container, exitCode int) (v1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := slices.Contains(r.ExitCodes.Values, int32(exitCode))
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// RestartsAll reports whether c exiting with exitCode restarts every
// container of its pod: a rule with the RestartAllContainers action
// matches it.
func RestartsAll(c *v1.Container, exitCode int) bool {
	r, ok := MatchingRule(c, exitCode)
	return ok && r.Action == v1.ContainerRestartRuleActionRestartAllContainers
}

// ContainerShouldRestart reports whether container c, which exited with
// exitCode, is started again in a pod of restartPolicy policy: its
// restartPolicyRules first, in order, then its own restartPolicy, then the
// pod's (podutil.ContainerShouldRestart with ContainerRestartRules and
// RestartAllContainersOnContainerExits, both on by default in v1.37).
func ContainerShouldRestart(c *v1.Container, policy v1.RestartPolicy, exitCode int) bool {
	if c.RestartPolicy == nil {
		return ShouldRestart(policy, exitCode)
	}
	if r, ok := MatchingRule(c, exitCode); ok {
		switch r.Action {
		case v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers:
			return true
		}
	}
	switch *c.RestartPolicy {
	case v1.ContainerRestartPolicyAlways:
		return true
	case v1.ContainerRestartPolicyOnFailure:
		return exitCode != 0
	case v1.ContainerRestartPolicyNever:
		return false
	}
	return ShouldRestart(policy, exitCode)
}

// RestartsAfterKill reports whether c, killed by the agent (a failed probe
// or postStart hook), is started again: only its restartPolicy, or the
// pod's, counts, as no exit code is there for its rules (the kubelet's
// computePodActions).
func RestartsAfterKill(c *v1.Container, policy v1.RestartPolicy) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return policy != v1.RestartPolicyNever
}

// CouldRestartAll reports whether a container of pod has a
// RestartAllContainers rule: only then does its status have the
// AllContainersRestarting condition (podutil.AllContainersCouldRestart).
func CouldRestartAll(pod *v1.Pod) bool {
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if slices.ContainsFunc(c.RestartPolicyRules, func(r v1.ContainerRestartRule) bool {
			return r.Action == v1.ContainerRestartRuleActionRestartAllContainers
		}) {
			return true
		}
	}
	return false
}
