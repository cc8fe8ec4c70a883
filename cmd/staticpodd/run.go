package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/ready"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/sysd"
)

func newRunCmd() *cobra.Command {
	var flags config.Flags
	var hooks testHooks
	var verbose, once bool
	var readyWhenFlag string
	var onceTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: keep the static pods running",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := newLogger(verbose)
			cfg, err := loadConfig(flags, logger)
			if err != nil {
				return err
			}
			opts := daemon.Options{Version: versionString(), NodeCgroup: hooks.nodeCgroup, NoMemoryNotifier: hooks.noMemoryNotifier}
			if once {
				return daemon.Once(cfg, opts, logger, onceTimeout, func(results []agent.OnceResult) error {
					return printOnce(cmd.OutOrStdout(), results)
				})
			}
			if cmd.Flags().Changed("once-timeout") {
				return fmt.Errorf("--once-timeout is for --once")
			}
			when, err := ready.Parse(readyWhenFlag)
			if err != nil {
				return err
			}
			opts.Flags, opts.ReadyWhen = &flags, when
			return daemon.Run(cfg, opts, logger)
		},
	}
	flags.Register(cmd.Flags())
	hooks.register(cmd.Flags())
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log at debug level")
	cmd.Flags().BoolVar(&once, "once", false, "start every pod, wait until each runs (or has finished, for restartPolicy Never and OnFailure), print the results and exit, leaving the pods running")
	cmd.Flags().StringVar(&readyWhenFlag, "ready-when", ready.Synced, "when to tell systemd READY=1: synced (every source read, first sync done), pods-running[:NAME,...] or pods-ready[:NAME,...] (the chosen pods, or all, are Running or Ready)")
	cmd.Flags().DurationVar(&onceTimeout, "once-timeout", defaultOnceTimeout, "with --once, how long to wait for the pods")
	return cmd
}

func newLogger(debug bool) *slog.Logger {
	if debug {
		return sysd.Logger(slog.LevelDebug)
	}
	return sysd.Logger(slog.LevelInfo)
}

// loadConfig is the daemon's configuration, its warnings logged.
func loadConfig(flags config.Flags, logger *slog.Logger) (*config.Config, error) {
	cfg, warnings, err := config.Load(flags.ConfigFile, flags)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		logger.Warn("configuration field ignored", "reason", w)
	}
	warnNotYetActedOn(cfg, logger)
	return cfg, nil
}

// notYetActedOn are settings this build reads and checks but does not act on
// yet, with why: run warns once for each given a value of its own, and config
// notes them.
var notYetActedOn = map[string]string{
	"maxPods": "maxPods is not enforced yet",
}

func warnNotYetActedOn(cfg *config.Config, logger *slog.Logger) {
	for _, e := range cfg.Entries() {
		reason, ok := notYetActedOn[e.Key]
		if !ok || e.Origin == config.OriginDefault {
			continue
		}
		logger.Warn("configuration field not acted on yet", "field", e.Key, "value", e.Value, "from", e.Origin, "reason", reason)
	}
}
