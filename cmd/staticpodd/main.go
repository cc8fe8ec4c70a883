// Command staticpodd runs Kubernetes static pods as OCI containers through runc's
// libcontainer, without a cluster.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/oci"
)

// globalOptions are the flags every subcommand shares.
type globalOptions struct {
	RootDir string // images, volumes, persistent state
	RunDir  string // container state, the CLI socket
}

func newRootCmd() *cobra.Command {
	o := &globalOptions{}
	root := &cobra.Command{
		Use:           "staticpodd",
		Short:         "Run Kubernetes static pods without a cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&o.RootDir, "root-dir", "/var/lib/staticpodd", "directory for images, volumes and state")
	root.PersistentFlags().StringVar(&o.RunDir, "run-dir", "/run/staticpodd", "directory for container state and the CLI socket")
	addCommands(root, o)
	return root
}

func main() {
	// libcontainer's init and the container monitor re-exec this binary.
	if oci.Reexec() {
		return
	}
	if err := newRootCmd().Execute(); err != nil {
		code := 1
		var exit *exitError
		if errors.As(err, &exit) {
			code = exit.code // exec passes its command's exit status on
		}
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "staticpodd:", err)
		}
		os.Exit(code)
	}
}
