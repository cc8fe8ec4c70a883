package daemon

import (
	"context"

	"github.com/staticpodd/staticpodd/agent/cri"
)

// serveCRI serves the CRI (k8s.io/cri-api v1) on <run-dir>/cri.sock until
// ctx ends, for kubeadm and crictl; a failure to bind is shown as the cri
// part's and tried again with back-off, as the read-only port's.
func (d *System) serveCRI(ctx context.Context) {
	cfg := d.config()
	path := cfg.CRISocket()
	logger := d.logger.With("subsystem", "cri")
	d.aux.Retry(ctx, d.criPart, func(ctx context.Context) error {
		s, err := cri.New(cri.Config{
			Agent:        d.agent,
			Images:       cri.NewImageService(CRIImages{Store: d.images, Puller: d.puller, Pulled: d.agent.Resync}, logger),
			Version:      d.opts.Version,
			ManifestDir:  cfg.StaticPodPath,
			CgroupDriver: cfg.CgroupDriver,
			Logger:       logger,
		})
		if err != nil {
			return err
		}
		l, err := cri.Listen(path)
		if err != nil {
			s.Close()
			return err
		}
		logger.Info("serving the CRI", "address", path, "maxConns", cri.MaxConns)
		d.aux.SetPart(d.criPart, nil)
		return s.Serve(ctx, l)
	})
}
