package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci"
	"github.com/staticpodd/staticpodd/oci/image"
)

// NewPuller is the image puller of the configuration: hosts.toml mirrors
// from the registry config dir, credentials from the first Docker config
// found (read again at each pull), at most one pull at a time from each
// registry with serializeImagePulls, else maxParallelImagePulls (0: no
// bound), critical pods' pulls besides; the progress deadline of
// --image-pull-progress-timeout.
func NewPuller(cfg *config.Config, store *image.Store, logger *slog.Logger) (*image.Puller, error) {
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

var (
	_ images.Puller     = imagePuller{}
	_ agent.TagResolver = imagePuller{}
)

func (p imagePuller) Present(ref string) (string, error) {
	img, err := p.store.Get(ref)
	if errors.Is(err, podspec.ErrImageNotPresent) {
		return "", nil
	}
	return img.ID, err
}

func (p imagePuller) Pull(ctx context.Context, ref string, o images.PullOptions) (string, error) {
	var last time.Time
	layers := -1
	img, err := p.puller.PullWith(ctx, ref, image.PullOptions{Critical: o.Critical, Secrets: o.Secrets, As: o.As, Progress: func(pr image.Progress) {
		// The pod's status is published at most every statusProgressPeriod,
		// and when a layer is done.
		if o.Progress == nil || (time.Since(last) < statusProgressPeriod && pr.LayersDone == layers) {
			return
		}
		last, layers = time.Now(), pr.LayersDone
		o.Progress(fmt.Sprintf("%d/%d layers, %s of %s", pr.LayersDone, pr.Layers, mib(pr.BytesDone), mib(pr.Bytes)))
	}})
	return img.ID, refusal(err)
}

// Resolve is the agent's TagResolver: the digest a followed tag names at
// its registry, asked as a pull of it would be.
func (p imagePuller) Resolve(ctx context.Context, ref string) (string, error) {
	return p.puller.Resolve(ctx, ref)
}

// statusProgressPeriod is how often a pull's progress may change its pod's
// status (the "Pulling image" message).
const statusProgressPeriod = 2 * time.Second

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// ImageReserve is the share of the image store's filesystem an import leaves
// free: where image garbage collection starts, so that an import never makes
// the collector remove images to make room for it.
func ImageReserve(cfg *config.Config) image.Option {
	return image.WithReserve(100 - int(cfg.ImageGCHighThresholdPercent))
}

// CheckConfig is what the runtime's start-up checks need of cfg.
func CheckConfig(cfg *config.Config) oci.CheckConfig {
	return oci.CheckConfig{CgroupRoot: cfg.CgroupRoot, CgroupDriver: cfg.CgroupDriver, FailSwapOn: cfg.FailSwapOn}
}
