package main

import "github.com/spf13/cobra"

// addCommands attaches every subcommand. Each lives in its own file.
func addCommands(root *cobra.Command, o *globalOptions) {
	root.AddCommand(
		newRunCmd(),
		newPsCmd(o),
		newLogsCmd(o),
		newEventsCmd(o),
		newExecCmd(o),
		newImagesCmd(o),
		newValidateCmd(),
		newCheckCmd(),
		newConfigCmd(o),
		newVersionCmd(),
	)
}
