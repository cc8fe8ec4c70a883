package main

import (
	"errors"
	"fmt"
	"net/url"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/daemon"
)

// newDebugCmd is `staticpodd debug POD --image IMAGE [--target CONTAINER] [-i]
// [-t] -- CMD...`: kubectl debug's ephemeral container, for a static pod.
func newDebugCmd(o *globalOptions) *cobra.Command {
	var image, target, namespace string
	var stdin, tty bool
	usage := "debug POD --image IMAGE [--target CONTAINER] [-i] [-t] -- COMMAND [ARG...]"
	cmd := &cobra.Command{
		Use:   usage,
		Short: "Run a command in a new container in a running pod's namespaces",
		Long: "Run a command in an ephemeral container of a running pod, as kubectl debug\n" +
			"does: a new rootfs from IMAGE (pulled if the node lacks it), the pod's\n" +
			"network, IPC and UTS namespaces, with --target the PID namespace of that\n" +
			"container. The pod's own containers are not touched. The container is\n" +
			"removed when the command exits or staticpodd is interrupted; staticpodd\n" +
			"exits with the command's exit status.",
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 || image == "" {
				return errors.New("usage: staticpodd " + usage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			pod, err := findPod(ctx, c, args[0], namespace)
			if err != nil {
				return err
			}
			e := newExecSession(args[1:], stdin, tty, cmd.ErrOrStderr())
			q := e.query()
			q.Set("image", image)
			if target != "" {
				q.Set("target", target)
			}
			return e.run(ctx, c, fmt.Sprintf("/debug/%s/%s?%s", url.PathEscape(pod.Namespace), url.PathEscape(pod.Name), q.Encode()))
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "the debug container's image (required)")
	cmd.Flags().StringVar(&target, "target", "", "the container whose processes the debug container sees (its PID namespace)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace, when the name is ambiguous")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass standard input to the command")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (with -i: this one, in raw mode)")
	return cmd
}
