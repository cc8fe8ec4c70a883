package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/agent/server"
)

// hostLogDir is what the node API's /logs/ serves, as the kubelet's.
const hostLogDir = "/var/log"

// errNodeAPIOff: authorization.mode Webhook with nobody to ask.
var errNodeAPIOff = errors.New("authorization.mode is Webhook and there is no --kubeconfig to send SubjectAccessReviews with: the node API (port) is not served; set authorization.mode: AlwaysAllow with authentication.x509.clientCAFile to serve it without an API server")

// errNodeAPIWaits: the kubelet personality before kubeadm has written its
// configuration, whose authentication and authorization are not known yet.
var errNodeAPIWaits = errors.New("the configuration file is not there yet: the node API (port) is not served until it is")

// nodeAPIOff is why cfg has the node API not served on port, or nil when it
// is served: not under authorization.mode Webhook with no API server to ask,
// nor before the kubelet personality has its configuration.
func nodeAPIOff(cfg *config.Config) error {
	switch {
	case cfg.MissingConfig != "":
		return errNodeAPIWaits
	case cfg.AuthorizationMode == "Webhook" && cfg.Kubeconfig == "":
		return errNodeAPIOff
	}
	return nil
}

// nodeAPI is the node API's handler and TLS configuration, as the kubelet's
// BuildAuth and InitializeTLS make them from the configuration, serving
// metrics, which the read-only port shares.
func (d *System) nodeAPI(metrics *server.Metrics) (http.Handler, *tls.Config, error) {
	cfg := d.cfg
	if err := nodeAPIOff(cfg); err != nil {
		return nil, nil, err
	}
	auth := &server.Auth{
		Anonymous:    cfg.AnonymousAuth,
		NoTokenAuthn: !cfg.WebhookAuthn,
		TokenTTL:     cfg.WebhookAuthnCacheTTL,
		AllowedTTL:   cfg.AuthzCacheAuthorized,
		DeniedTTL:    cfg.AuthzCacheUnauthorized,
		NodeName:     cfg.NodeName,
	}
	var reviewer *mirror.Reviewer
	if d.credentials != nil {
		reviewer = mirror.NewReviewer(d.credentials)
	}
	if cfg.WebhookAuthn && reviewer != nil {
		auth.Tokens = reviewer
	}
	if cfg.AuthorizationMode == "Webhook" {
		auth.Access = reviewer
	}
	logger := d.logger.With("subsystem", "http", "listener", "node api")
	t := server.TLS{
		CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSPrivateKeyFile,
		PKIDir: cfg.CertDir, Host: cfg.NodeName,
		RequestClientCerts: cfg.ClientCAFile != "", Logger: logger,
	}
	var err error
	if t.MinVersion, err = config.TLSVersion(cfg.TLSMinVersion); err != nil {
		return nil, nil, err
	}
	if t.CipherSuites, err = config.CipherSuites(cfg.TLSCipherSuites); err != nil {
		return nil, nil, err
	}
	if cfg.ClientCAFile != "" {
		if auth.ClientCAs, err = server.ClientCAFile(cfg.ClientCAFile, logger); err != nil {
			return nil, nil, err
		}
	}
	tc, err := t.Config()
	if err != nil {
		return nil, nil, err
	}
	h := server.Node(served{d.agent, d.aux}, server.NodeConfig{
		Auth:       auth,
		Metrics:    metrics,
		HostLogDir: hostLogDir,
		Configz: func() any {
			m, err := cfg.Kubelet()
			if err != nil {
				logger.Error("/configz", "err", err)
			}
			return m
		},
	}, logger)
	return h, tc, nil
}

// serveNodeAPI serves the node API on address:port until ctx ends; a
// failure to set it up or to bind is shown as the node-api part's and tried
// again with back-off, as the read-only port's.
func (d *System) serveNodeAPI(ctx context.Context, files uint64, metrics *server.Metrics) {
	addr := net.JoinHostPort(d.cfg.Address, strconv.Itoa(int(d.cfg.Port)))
	lim := server.DefaultLimits(server.NodeMaxConns).FitFiles(files)
	metrics.CountHandshakesRefused(lim.HandshakesRefused)
	d.aux.Retry(ctx, d.nodePort, func(ctx context.Context) error {
		h, tc, err := d.nodeAPI(metrics)
		if err != nil {
			return fmt.Errorf("node API: %w", err)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		d.logger.Info("serving the node API", "address", addr, "maxConns", lim.MaxConns,
			"authorization", d.cfg.AuthorizationMode, "clientCA", d.cfg.ClientCAFile != "", "anonymous", d.cfg.AnonymousAuth)
		d.aux.SetPart(d.nodePort, nil)
		return server.ServeTLS(ctx, l, h, tc, lim, d.logger.With("subsystem", "http", "listener", "node api"))
	})
}

// What the node API's metrics read from the agent.
var (
	_ server.ProbeCounter      = served{}
	_ server.EvictionCounter   = served{}
	_ server.Timer             = served{}
	_ server.NodeReporter      = served{}
	_ server.URLRequestCounter = served{}
)
