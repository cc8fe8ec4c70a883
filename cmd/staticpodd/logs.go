package main

import (
	"context"
	"fmt"
	"net/url"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

// newLogsCmd is `staticpodd logs POD [-c NAME] [-f] [--previous]`, read through
// the daemon, which knows where each container's CRI log file is.
func newLogsCmd(o *globalOptions) *cobra.Command {
	var container, namespace string
	var follow, previous bool
	cmd := &cobra.Command{
		Use:   "logs POD [-c CONTAINER] [-f] [--previous]",
		Short: "Print a container's logs",
		Long: "Print a container's logs. POD is the pod's name as the daemon shows it\n" +
			"(<name>-<node>) or as its manifest names it (<name>).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			c := newDaemonClient(filepath.Join(o.RunDir, socketName))
			pod, err := findPod(ctx, c, args[0], namespace)
			if err != nil {
				return err
			}
			if container == "" {
				container = defaultContainer(pod, cmd.ErrOrStderr())
			}
			q := url.Values{}
			if follow {
				q.Set("follow", "true")
			}
			if previous {
				q.Set("previous", "true")
			}
			path := fmt.Sprintf("/containerLogs/%s/%s/%s?%s", url.PathEscape(pod.Namespace),
				url.PathEscape(pod.Name), url.PathEscape(container), q.Encode())
			return c.stream(ctx, path, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&container, "container", "c", "", "the container (default: the one annotation "+defaultContainerAnnotation+" names, else the first)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace, when the name is ambiguous")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing as the container writes")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "the logs of the run before the current one")
	return cmd
}

// findPod finds the pod called name, as the daemon or as its manifest names it.
func findPod(ctx context.Context, c *daemonClient, name, namespace string) (*v1.Pod, error) {
	var list v1.PodList
	if err := c.getJSON(ctx, "/pods", &list); err != nil {
		return nil, err
	}
	var found []v1.Pod
	for _, p := range list.Items {
		if namespace != "" && p.Namespace != namespace {
			continue
		}
		if p.Name == name || p.Name == name+"-"+p.Spec.NodeName {
			found = append(found, p)
		}
	}
	// During an edit the old generation is listed, Terminating, beside the
	// new one: the new one is the pod.
	if live := slices.DeleteFunc(slices.Clone(found), func(p v1.Pod) bool { return p.DeletionTimestamp != nil }); len(live) > 0 {
		found = live
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no pod %q", name)
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("pod name %q is in several namespaces: choose one with -n", name)
}

func containerNames(p *v1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}
