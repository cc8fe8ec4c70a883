package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// podutil.ContainerShouldRestart's order: the first matching rule, then the
// container's restartPolicy, then the pod's.
func TestContainerShouldRestart(t *testing.T) {
	rules := func(policy v1.ContainerRestartPolicy, rs ...v1.ContainerRestartRule) *v1.Container {
		return &v1.Container{Name: "c", RestartPolicy: &policy, RestartPolicyRules: rs}
	}
	on := func(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
	}
	const (
		restart = v1.ContainerRestartRuleActionRestart
		all     = v1.ContainerRestartRuleActionRestartAllContainers
		in      = v1.ContainerRestartRuleOnExitCodesOpIn
		notIn   = v1.ContainerRestartRuleOnExitCodesOpNotIn
	)
	for _, tc := range []struct {
		name      string
		c         *v1.Container
		pod       v1.RestartPolicy
		code      int
		want, all bool
	}{
		{"pod Never", &v1.Container{}, v1.RestartPolicyNever, 1, false, false},
		{"pod OnFailure, failed", &v1.Container{}, v1.RestartPolicyOnFailure, 1, true, false},
		{"pod OnFailure, succeeded", &v1.Container{}, v1.RestartPolicyOnFailure, 0, false, false},
		{"pod Always", &v1.Container{}, v1.RestartPolicyAlways, 0, true, false},
		{"own Never beats pod Always", rules(v1.ContainerRestartPolicyNever), v1.RestartPolicyAlways, 1, false, false},
		{"own OnFailure beats pod Never", rules(v1.ContainerRestartPolicyOnFailure), v1.RestartPolicyNever, 3, true, false},
		{"own Always", rules(v1.ContainerRestartPolicyAlways), v1.RestartPolicyNever, 0, true, false},
		{"Restart rule In", rules(v1.ContainerRestartPolicyNever, on(restart, in, 3, 4)), v1.RestartPolicyNever, 4, true, false},
		{"Restart rule In, other code", rules(v1.ContainerRestartPolicyNever, on(restart, in, 3, 4)), v1.RestartPolicyAlways, 5, false, false},
		{"Restart rule NotIn", rules(v1.ContainerRestartPolicyNever, on(restart, notIn, 0)), v1.RestartPolicyNever, 2, true, false},
		{"Restart rule NotIn, listed code", rules(v1.ContainerRestartPolicyNever, on(restart, notIn, 0)), v1.RestartPolicyNever, 0, false, false},
		{"RestartAllContainers rule", rules(v1.ContainerRestartPolicyNever, on(all, in, 42)), v1.RestartPolicyNever, 42, true, true},
		{"first matching rule wins", rules(v1.ContainerRestartPolicyNever, on(restart, in, 42), on(all, in, 42)), v1.RestartPolicyNever, 42, true, false},
		{"no match: own policy", rules(v1.ContainerRestartPolicyOnFailure, on(all, in, 42)), v1.RestartPolicyNever, 1, true, false},
		{"rules without a restartPolicy are not read", &v1.Container{RestartPolicyRules: []v1.ContainerRestartRule{on(all, in, 42)}}, v1.RestartPolicyNever, 42, false, true},
		{"a rule without exit codes matches nothing", rules(v1.ContainerRestartPolicyNever, v1.ContainerRestartRule{Action: all}), v1.RestartPolicyNever, 1, false, false},
	} {
		if got := ContainerShouldRestart(tc.c, tc.pod, tc.code); got != tc.want {
			t.Errorf("%s: ContainerShouldRestart = %v, want %v", tc.name, got, tc.want)
		}
		if got := RestartsAll(tc.c, tc.code); got != tc.all {
			t.Errorf("%s: RestartsAll = %v, want %v", tc.name, got, tc.all)
		}
	}
}

// A killed container (a probe, a postStart hook) restarts by its own
// restartPolicy, else the pod's: no exit code for its rules.
func TestRestartsAfterKill(t *testing.T) {
	never, onFailure := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	for _, tc := range []struct {
		c    *v1.Container
		pod  v1.RestartPolicy
		want bool
	}{
		{&v1.Container{}, v1.RestartPolicyNever, false},
		{&v1.Container{}, v1.RestartPolicyOnFailure, true},
		{&v1.Container{RestartPolicy: &never}, v1.RestartPolicyAlways, false},
		{&v1.Container{RestartPolicy: &onFailure}, v1.RestartPolicyNever, true},
	} {
		if got := RestartsAfterKill(tc.c, tc.pod); got != tc.want {
			t.Errorf("%+v under %s: %v, want %v", tc.c.RestartPolicy, tc.pod, got, tc.want)
		}
	}
}
