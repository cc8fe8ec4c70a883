package daemon

import (
	"context"
	"net"

	"github.com/staticpodd/staticpodd/agent/cri"
)

// serveCRI serves the CRI (k8s.io/cri-api v1) until ctx ends, for kubeadm
// and crictl: on passed, the socket systemd passed by the name "cri"
// (socket activation, packaging/kubeadm/staticpodd-cri.socket), else on
// <run-dir>/cri.sock, which it binds. A failure to bind is shown as the cri
// part's and tried again with back-off, as the read-only port's.
func (d *System) serveCRI(ctx context.Context, passed net.Listener) {
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
		l, how, err := criListener(&passed, path)
		if err != nil {
			s.Close()
			return err
		}
		logger.Info("serving the CRI", "address", l.Addr().String(), "on", how, "maxConns", cri.MaxConns)
		d.aux.SetPart(d.criPart, nil)
		return s.Serve(ctx, l)
	})
}

// criListener is the CRI's listener: the passed one, taken once (Serve
// closes it; a retry after it failed binds path, where clients look), else
// path bound by the daemon. how says which, for the log.
func criListener(passed *net.Listener, path string) (l net.Listener, how string, err error) {
	if l = *passed; l != nil {
		*passed = nil
		return l, "a socket systemd passed", nil
	}
	if l, err = cri.Listen(path); err != nil {
		return nil, "", err
	}
	return l, "a socket of its own", nil
}
