package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/oci"
)

// newCheckCmd is `staticpodd check`: the daemon's start-up checks, with its
// configuration, starting nothing; one line per failure and a non-zero exit.
func newCheckCmd() *cobra.Command {
	var flags config.Flags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Run the start-up checks (cgroups, swap, /proc and /sys, the image policy) without starting anything",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := config.Load(flags.ConfigFile, flags)
			if err != nil {
				return err
			}
			if err := startupChecks(cfg, cmd.ErrOrStderr()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "all start-up checks passed")
			return nil
		},
	}
	flags.Register(cmd.Flags())
	return cmd
}

// startupChecks runs oci's checks for cfg, writes one line per failure to w
// and fails if there was one.
func startupChecks(cfg *config.Config, w io.Writer) error {
	errs := oci.Check(daemon.CheckConfig(cfg))
	if err := oci.CheckBuild(); err != nil {
		errs = append(errs, err)
	}
	// The daemon does not start with an image policy that does not load.
	if _, err := daemon.ImagePolicy(cfg); err != nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		fmt.Fprintln(w, "check failed:", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d start-up check(s) failed", len(errs))
	}
	return nil
}
