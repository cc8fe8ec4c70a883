package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/rollout"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/daemon"
)

// newRolloutCmd is `staticpodd rollout history|status|undo POD`: a pod's
// generations (agent/rollout), as kubectl rollout shows a Deployment's.
func newRolloutCmd(o *globalOptions) *cobra.Command {
	var namespace string
	get := func(cmd *cobra.Command, name string) (*server.Rollout, error) {
		c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
		ns, pod, err := c.RolloutTarget(cmd.Context(), name, namespace)
		if err != nil {
			return nil, err
		}
		var r server.Rollout
		if err := c.GetJSON(cmd.Context(), "/rollouts/"+ns+"/"+pod, &r); err != nil {
			return nil, err
		}
		if r.Damaged != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "staticpodd: %s\n", r.Damaged)
		}
		return &r, nil
	}
	cmd := &cobra.Command{Use: "rollout", Short: "Show or undo the rollouts of a pod's generations"}
	history := &cobra.Command{
		Use: "history POD", Short: "The pod's generations kept: their image IDs, Ready times and rollback reasons",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := get(cmd, args[0])
			if err != nil {
				return err
			}
			return rollout.PrintHistory(cmd.OutOrStdout(), r.History)
		},
	}
	status := &cobra.Command{
		Use: "status POD", Short: "Where the pod's current generation is; exits 1 when rolled back or failed",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := get(cmd, args[0])
			if err != nil {
				return err
			}
			if r.Status.Failed() {
				return errors.New(r.Status.State + ": " + r.Status.Message)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", r.Status.State, r.Status.Message)
			return err
		},
	}
	undo := &cobra.Command{
		Use: "undo POD", Short: "Run the pod's previous Ready generation until its manifest changes",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			ns, pod, err := c.RolloutTarget(cmd.Context(), args[0], namespace)
			if err != nil {
				return err
			}
			var u server.Undone
			if err := c.PostJSON(cmd.Context(), "/rollouts/"+ns+"/"+pod+"/undo", &u); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "pod %s/%s rolled back to generation %s\n", ns, pod, u.UID)
			return err
		},
	}
	for _, c := range []*cobra.Command{history, status, undo} {
		c.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace, when the name is ambiguous")
		c.ValidArgsFunction = completePods(o)
		cmd.AddCommand(c)
	}
	return cmd
}
