package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/agent/ready"
	"github.com/staticpodd/staticpodd/daemon"
)

// newKubeletCmd is the kubelet personality: `staticpodd kubelet`, and the
// binary invoked as kubelet (main). It takes the kubelet's command line as
// kubeadm's kubelet.service gives it (config.KubeletFlags) and runs the
// daemon as run does.
func newKubeletCmd() *cobra.Command {
	var kf config.KubeletFlags
	cmd := &cobra.Command{
		Use:   config.KubeletName + " [kubelet flags]",
		Short: "Run the daemon with the kubelet's flags, as kubeadm's kubelet.service gives them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flags, notes, err := kf.Resolve()
			if err != nil {
				return err
			}
			if kf.Version == "true" {
				// What kubeadm's preflight parses: the kubelet's version.
				fmt.Fprintln(cmd.OutOrStdout(), "Kubernetes", mirror.KubeletVersion)
				return nil
			}
			logger := newLogger(kf.Verbosity >= 4)
			for _, n := range notes {
				logger.Warn("kubelet flag ignored", "reason", n)
			}
			cfg, err := loadConfig(flags, logger)
			if err != nil {
				return err
			}
			when, err := ready.Parse(ready.Synced)
			if err != nil {
				return err
			}
			return daemon.Run(cfg, daemon.Options{Version: versionString(), Flags: &flags, ReadyWhen: when}, logger)
		},
	}
	kf.Register(cmd.Flags())
	return cmd
}
