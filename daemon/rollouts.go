package daemon

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/agent/rollout"
)

// RolloutTarget is the namespace and name of the pod that name names for
// `staticpodd rollout`: a pod the daemon (or its records) lists, as for
// every command (describe.Find), else one that has a rollout history only,
// which a pod no longer running, its records gone, still has.
func (c *Client) RolloutTarget(ctx context.Context, name, namespace string) (string, string, error) {
	var list v1.PodList
	err := c.GetJSON(ctx, "/pods", &list)
	if err == nil {
		var pod *v1.Pod
		if pod, err = describe.Find(list.Items, name, namespace); err == nil {
			return pod.Namespace, pod.Name, nil
		}
	}
	var names []string
	if c.GetJSON(ctx, "/rollouts", &names) == nil {
		if ns, n, merr := rollout.Match(names, name, namespace); merr == nil {
			return ns, n, nil
		}
	}
	return "", "", err
}
