package manifest

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// restartPolicy validates a container's own restartPolicy and its
// restartPolicyRules, of any container (the API server's
// validateContainerRestartPolicy and validateInitContainerRestartPolicy
// with ContainerRestartRules and RestartAllContainersOnContainerExits, both
// on by default in v1.37): a rule needs a restartPolicy, an action,
// exit codes and their operator.
func (v *validator) restartPolicy(p *field.Path, policy *v1.ContainerRestartPolicy, rules []v1.ContainerRestartRule) {
	rp := p.Child("restartPolicy")
	switch {
	case policy == nil && len(rules) > 0:
		v.add(field.Required(rp, "must specify restartPolicy when restart rules are used"))
	case policy == nil:
		return
	default:
		switch *policy {
		case v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure:
		default:
			v.add(field.NotSupported(rp, *policy, []v1.ContainerRestartPolicy{
				v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure}))
		}
	}
	rulesPath := p.Child("restartPolicyRules")
	if len(rules) > maxRestartRules {
		v.add(field.TooMany(rulesPath, len(rules), maxRestartRules))
		return // nor each rule: a hostile manifest gets a few lines, not thousands
	}
	for i, r := range rules {
		ip := rulesPath.Index(i)
		switch r.Action {
		case v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers:
		default:
			v.add(field.NotSupported(ip.Child("action"), r.Action, []v1.ContainerRestartRuleAction{
				v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers}))
		}
		if r.ExitCodes == nil {
			v.add(field.Required(ip.Child("exitCodes"), "must be specified"))
			continue
		}
		ep := ip.Child("exitCodes")
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn:
		default:
			v.add(field.NotSupported(ep.Child("operator"), r.ExitCodes.Operator, []v1.ContainerRestartRuleOnExitCodesOperator{
				v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn}))
		}
		if len(r.ExitCodes.Values) > maxRestartExitCodes {
			v.add(field.TooMany(ep.Child("values"), len(r.ExitCodes.Values), maxRestartExitCodes))
		}
	}
}
