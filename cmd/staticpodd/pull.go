package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/bar"
)

// newImagesPullCmd is `staticpodd images pull REF...`: a pull by hand, with
// the daemon's mirrors and credentials, into the store it shares.
func newImagesPullCmd(o *globalOptions) *cobra.Command {
	var configFile, registryDir, policyFile string
	cmd := &cobra.Command{
		Use:   "pull REF...",
		Short: "Pull images from their registries (or the mirrors of --registry-config-dir)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := config.Load(configFile, config.Flags{RootDir: o.RootDir, RegistryConfigDir: registryDir, ImagePolicy: policyFile})
			if err != nil {
				return err
			}
			logger := cliLogger(cmd.ErrOrStderr())
			s, _, err := daemon.OpenImages(cfg, logger)
			if err != nil {
				return err
			}
			p, err := daemon.NewPuller(cfg, s, logger)
			if err != nil {
				return err
			}
			for _, ref := range args {
				b := bar.New(cmd.ErrOrStderr(), "pull "+ref)
				img, err := p.PullWith(cmd.Context(), ref, image.PullOptions{Progress: b.Update})
				b.Done()
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pulled %s %s %s\n", shortID(img.ID), strings.Join(img.Refs, " "), strings.Join(img.RepoDigests, " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configFile, config.FlagConfig, "", "KubeletConfiguration file, for imageGCHighThresholdPercent and maxParallelImagePulls")
	cmd.Flags().StringVar(&policyFile, config.FlagImagePolicy, "", "image signature policy (containers-policy.json) the images must meet (default $"+config.EnvImagePolicy+")")
	cmd.Flags().StringVar(&registryDir, config.FlagRegistryConfigDir, "", "registry mirrors in containerd's hosts.toml layout (default "+config.DefaultRegistryConfigDir+")")
	return cmd
}
