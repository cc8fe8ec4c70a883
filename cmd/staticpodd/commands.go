package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// addCommands attaches every subcommand. Each lives in its own file.
func addCommands(root *cobra.Command, o *globalOptions) {
	root.AddCommand(
		newRunCmd(),
		newKubeletCmd(),
		newPsCmd(o),
		newDescribeCmd(o),
		newLogsCmd(o),
		newEventsCmd(o),
		newExecCmd(o),
		newRolloutCmd(o),
		newDebugCmd(o),
		newRestartCmd(o),
		newImagesCmd(o),
		newBundleCmd(o),
		newValidateCmd(o),
		newCheckCmd(),
		newConfigCmd(o),
		newVersionCmd(),
	)
	// --version, as the kubelet, crictl and podman take it; no -v: the
	// kubelet's -v is verbosity. Answered here rather than through cobra's
	// Version, whose output only a template changes: a text/template
	// executed anywhere in the binary makes the linker keep every exported
	// method of every type (it cannot tell which one a template calls by
	// name), 15 MB of this binary (docs/benchmarks.md, "Binary size").
	root.Flags().Bool("version", false, "print the version")
	requireSubcommand(root)
	group := root.RunE
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if v, _ := cmd.Flags().GetBool("version"); v {
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		}
		return group(cmd, args)
	}
	completePodArgs(root, o)
}

// requireSubcommand makes c and every command under it that only groups
// subcommands print its help when given none (exit 0, as cobra does) and
// fail on an unknown one, its usage on stderr: cobra would print the help and
// exit 0 for `images prune`. kubectl's DefaultSubCommandRun does the same,
// but exits 1 for a bare group too.
func requireSubcommand(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireSubcommand(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.SuggestionsMinimumDistance = 2 // cobra's default
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		cmd.PrintErr(cmd.UsageString())
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += " (did you mean " + strings.Join(s, " or ") + "?)"
		}
		return errors.New(msg)
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}
