package main

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/daemon"
)

// newRestartCmd is `staticpodd restart POD...`: a new generation of each pod
// from the same manifest, made by the daemon.
func newRestartCmd(o *globalOptions) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "restart POD [POD...]",
		Short: "Restart pods as a new generation of the same manifest",
		Long: "Restart pods as kubectl rollout restart does: each gets a new UID and the\n" +
			"annotation kubectl.kubernetes.io/restartedAt; its containers stop as for an\n" +
			"edit of its manifest (preStop hooks, grace period), and new ones start.\n" +
			"The restart is kept across daemon restarts until the pod's manifest is\n" +
			"removed. POD is the pod's name as the daemon shows it (<name>-<node>) or\n" +
			"as its manifest names it (<name>). The daemon must be running.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := daemon.NewClient(filepath.Join(o.RunDir, socketName))
			var errs []error
			for _, name := range args {
				pod, err := findPod(cmd.Context(), c, name, namespace)
				if err == nil {
					var r server.Restarted
					err = c.PostJSON(cmd.Context(), "/restart/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name), &r)
					if err == nil {
						fmt.Fprintf(cmd.OutOrStdout(), "pod/%s restarted\n", r.Pod)
					}
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("restart %s: %w", name, err))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pods' namespace, when a name is ambiguous")
	return cmd
}
