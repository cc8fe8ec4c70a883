package main

import (
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/daemon"
)

// newDescribeCmd is `staticpodd describe POD`: one pod in full, as kubectl
// describe pod shows it (agent/describe).
func newDescribeCmd(o *globalOptions) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe POD",
		Short: "Show a pod in full: each container's last exit, probes and mounts, the network, the events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			pod, err := findPod(cmd.Context(), c, args[0], namespace)
			if err != nil {
				return err
			}
			var evs v1.EventList
			var probes []prober.Status
			if err = c.GetJSON(cmd.Context(), "/events", &evs); err == nil {
				err = c.GetJSON(cmd.Context(), "/probes", &probes)
			}
			if err != nil {
				return err
			}
			return describe.Pod(cmd.OutOrStdout(), *pod, evs.Items, probes, time.Now())
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace, when the name is ambiguous")
	return cmd
}
