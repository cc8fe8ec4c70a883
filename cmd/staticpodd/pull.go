package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image"
)

// newPuller is the image puller of the configuration: hosts.toml mirrors
// from the registry config dir, credentials from the first Docker config
// found (read again at each pull), at most one pull at a time from each
// registry with serializeImagePulls, else maxParallelImagePulls (0: no
// bound), critical pods' pulls besides; the progress deadline of
// --image-pull-progress-timeout.
func newPuller(cfg *config.Config, store *image.Store, logger *slog.Logger) (*image.Puller, error) {
	paths := image.CredentialPaths(cfg.RootDir)
	// Read once here too: a broken file is said at start, and which one is used.
	keys, err := image.LoadKeyring(paths)
	if err != nil {
		logger.Warn("cannot read registry credentials; pulls fail until it is fixed", "err", err)
	} else if keys.File() != "" {
		logger.Info("registry credentials", "file", keys.File())
	}
	parallel := int(cfg.MaxParallelImagePulls)
	if cfg.SerializeImagePulls {
		parallel = 1
	}
	return image.NewPuller(store, image.PullConfig{HostsDir: cfg.RegistryConfigDir, CredentialPaths: paths, MaxParallel: parallel,
		ProgressTimeout: cfg.ImagePullProgressTimeout}, logger), nil
}

// imagePuller is the agent's images.Puller over the store and its puller.
type imagePuller struct {
	store  *image.Store
	puller *image.Puller
}

var _ images.Puller = imagePuller{}

func (p imagePuller) Present(ref string) (bool, error) {
	_, err := p.store.Get(ref)
	if errors.Is(err, podspec.ErrImageNotPresent) {
		return false, nil
	}
	return err == nil, err
}

func (p imagePuller) Pull(ctx context.Context, ref string, o images.PullOptions) error {
	_, err := p.puller.PullWith(ctx, ref, image.PullOptions{Critical: o.Critical, Progress: func(pr image.Progress) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("%d/%d layers, %s of %s", pr.LayersDone, pr.Layers, mib(pr.BytesDone), mib(pr.Bytes)))
		}
	}})
	return err
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// newImagesPullCmd is `staticpodd images pull REF...`: a pull by hand, with
// the daemon's mirrors and credentials, into the store it shares.
func newImagesPullCmd(o *globalOptions) *cobra.Command {
	var configFile, registryDir string
	cmd := &cobra.Command{
		Use:   "pull REF...",
		Short: "Pull images from their registries (or the mirrors of --registry-config-dir)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := config.Load(configFile, config.Flags{RootDir: o.RootDir, RegistryConfigDir: registryDir})
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			s, err := image.Open(filepath.Join(o.RootDir, "images"), logger, imageReserve(cfg))
			if err != nil {
				return err
			}
			p, err := newPuller(cfg, s, logger)
			if err != nil {
				return err
			}
			for _, ref := range args {
				img, err := p.Pull(cmd.Context(), ref, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pulled %s %s %s\n", shortID(img.ID), strings.Join(img.Refs, " "), strings.Join(img.RepoDigests, " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configFile, config.FlagConfig, "", "KubeletConfiguration file, for imageGCHighThresholdPercent and maxParallelImagePulls")
	cmd.Flags().StringVar(&registryDir, config.FlagRegistryConfigDir, "", "registry mirrors in containerd's hosts.toml layout (default "+config.DefaultRegistryConfigDir+")")
	return cmd
}
