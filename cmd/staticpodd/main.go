// Command staticpodd runs Kubernetes static pods as OCI containers through runc's
// libcontainer, without a cluster.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/describe"
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
	root.PersistentFlags().StringVar(&o.RootDir, config.FlagRootDir, config.DefaultRootDir,
		"directory for images, volumes and state (env "+config.EnvRootDir+")")
	root.PersistentFlags().StringVar(&o.RunDir, config.FlagRunDir, config.DefaultRunDir,
		"directory for container state and the CLI socket (env "+config.EnvRunDir+")")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { o.fromEnv(cmd.Flags()) }
	addCommands(root, o)
	return root
}

// fromEnv takes each dir whose flag was not given from its environment
// variable, as config.Load does for the daemon.
func (o *globalOptions) fromEnv(fs *pflag.FlagSet) {
	for _, d := range []struct {
		flag, env string
		dst       *string
	}{{config.FlagRootDir, config.EnvRootDir, &o.RootDir}, {config.FlagRunDir, config.EnvRunDir, &o.RunDir}} {
		if v := os.Getenv(d.env); v != "" && !fs.Changed(d.flag) {
			*d.dst = v
		}
	}
}

func init() {
	// The main goroutine keeps the main thread, so that no other goroutine
	// ever runs there. A goroutine that ends locked to its thread (a pod's
	// namespaces are made, a subPath resolved, on such goroutines) ends that
	// thread, except the main one, which the Go runtime parks for good as it
	// is: it would stay in a pod's namespaces, keep them alive after the pod
	// is gone, and be what /proc/self names.
	runtime.LockOSThread()
}

func main() {
	// libcontainer's init and the container monitor re-exec this binary.
	if oci.Reexec() {
		return
	}
	root := newRootCmd()
	if filepath.Base(os.Args[0]) == config.KubeletName {
		// Invoked through a symlink named kubelet: the kubelet personality.
		root.SetArgs(append([]string{config.KubeletName}, os.Args[1:]...))
	}
	if err := root.Execute(); err != nil {
		code := 1
		var exit *exitError
		if errors.As(err, &exit) {
			code = exit.code // exec passes its command's exit status on
		}
		printError(os.Stderr, err)
		os.Exit(code)
	}
}

// printError writes err for the terminal, its control characters but line
// breaks and tabs escaped: it may quote a registry, a manifest URL's server
// or a container.
func printError(w io.Writer, err error) {
	if err.Error() != "" {
		fmt.Fprintln(w, "staticpodd:", describe.EscapeBut(err.Error(), "\n\t"))
	}
}
