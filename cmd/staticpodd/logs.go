package main

import (
	"context"
	"fmt"
	"net/url"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/daemon"
)

// newLogsCmd is `staticpodd logs POD [-c NAME] [-f] [--previous] [--tail N]
// [--since DURATION] [--timestamps]`, read through the daemon, which knows
// where each container's CRI log files are.
func newLogsCmd(o *globalOptions) *cobra.Command {
	var container, namespace string
	var follow, previous, timestamps bool
	var tail int64
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "logs POD [-c CONTAINER] [-f] [--previous] [--tail N] [--since DURATION] [--timestamps]",
		Short: "Print a container's logs",
		Long: "Print a container's logs: the run's files rotated by size, then the current one.\n" +
			"With -f, keep printing as the container writes, through rotations and restarts,\n" +
			"until the container will not run again. POD is the pod's name as the daemon\n" +
			"shows it (<name>-<node>) or as its manifest names it (<name>).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := logQuery(follow, previous, timestamps, tail, since)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			pod, err := findPod(ctx, c, args[0], namespace)
			if err != nil {
				return err
			}
			if container == "" {
				container = describe.DefaultContainer(pod, cmd.ErrOrStderr())
			}
			path := fmt.Sprintf("/containerLogs/%s/%s/%s?%s", url.PathEscape(pod.Namespace),
				url.PathEscape(pod.Name), url.PathEscape(container), q.Encode())
			return c.Stream(ctx, path, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&container, "container", "c", "", "the container (default: the one annotation "+describe.DefaultContainerAnnotation+" names, else the first)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace, when the name is ambiguous")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing as the container writes")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "the logs of the run before the current one")
	cmd.Flags().Int64Var(&tail, "tail", -1, "print only the last N lines (-1: all)")
	cmd.Flags().DurationVar(&since, "since", 0, "print only lines newer than this, e.g. 5s, 2m, 3h")
	cmd.Flags().BoolVar(&timestamps, "timestamps", false, "start each line with the time it was written (RFC 3339)")
	return cmd
}

// logQuery is the kubelet API's query for the logs asked for. --since is sent
// in whole seconds, rounded to the nearest as kubectl rounds it, but at least
// one (the API refuses 0).
func logQuery(follow, previous, timestamps bool, tail int64, since time.Duration) (url.Values, error) {
	q := url.Values{}
	for name, set := range map[string]bool{"follow": follow, "previous": previous, "timestamps": timestamps} {
		if set {
			q.Set(name, "true")
		}
	}
	if tail < -1 {
		return nil, fmt.Errorf("--tail %d: want a number of lines, or -1 for all", tail)
	}
	if tail >= 0 {
		q.Set("tailLines", strconv.FormatInt(tail, 10))
	}
	if since < 0 {
		return nil, fmt.Errorf("--since %v: want a duration that is not negative", since)
	}
	if since > 0 {
		q.Set("sinceSeconds", strconv.FormatInt(max(int64(since.Round(time.Second).Seconds()), 1), 10))
	}
	return q, nil
}

// findPod finds the pod called name, as the daemon or as its manifest names it
// (describe.Find).
func findPod(ctx context.Context, c *daemon.Client, name, namespace string) (*v1.Pod, error) {
	var list v1.PodList
	if err := c.GetJSON(ctx, "/pods", &list); err != nil {
		return nil, err
	}
	return describe.Find(list.Items, name, namespace)
}

func containerNames(p *v1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}
