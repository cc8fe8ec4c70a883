package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reloadEvery is how often a reloaded file is checked for a change, at
// most: one stat per file per second, whatever the request rate.
const reloadEvery = time.Second

// reloader keeps what load makes of some files, and makes it again when
// one of them changes (its inode, size or modification time), as the
// kubelet reloads its serving certificate (ReloadKubeletServerCertificateFile)
// and client CA bundle (ReloadKubeletClientCAFile). A change that does not
// load (a certificate written before its key) keeps the last good value
// and is tried again at the next check.
type reloader[T any] struct {
	paths  []string
	load   func() (T, error)
	what   string
	logger *slog.Logger

	mu      sync.Mutex // guards the fields below
	cur     T
	stamp   string
	checked time.Time
}

// newReloader loads the files once; their error is the caller's.
func newReloader[T any](what string, load func() (T, error), logger *slog.Logger, paths ...string) (*reloader[T], error) {
	r := &reloader[T]{paths: paths, load: load, what: what, logger: logger}
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.cur, r.stamp, r.checked = v, r.fileStamp(), time.Now()
	return r, nil
}

func (r *reloader[T]) fileStamp() string {
	var b strings.Builder
	for _, p := range r.paths {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", p)
			continue
		}
		ino := uint64(0)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = uint64(st.Ino)
		}
		fmt.Fprintf(&b, "%s:%d:%d:%d;", p, ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

func (r *reloader[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < reloadEvery {
		return r.cur
	}
	r.checked = time.Now()
	stamp := r.fileStamp()
	if stamp == r.stamp {
		return r.cur
	}
	v, err := r.load()
	if err != nil {
		r.logger.Warn("changed file not loaded; the last good one stays in use", "what", r.what, "err", err)
		return r.cur
	}
	r.cur, r.stamp = v, stamp
	r.logger.Info("reloaded", "what", r.what, "files", r.paths)
	return r.cur
}

// certReloader serves the certificate of certFile and keyFile as they are
// now.
func certReloader(certFile, keyFile string, logger *slog.Logger) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	r, err := newReloader("serving certificate", func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", certFile, keyFile, err)
		}
		return &c, nil
	}, logger, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get(), nil }, nil
}

// ClientCAFile returns the CA bundle of path as it is now, for
// Auth.ClientCAs: a bundle rotated on disk is used from the next request
// on (within a second), without a restart.
func ClientCAFile(path string, logger *slog.Logger) (func() *x509.CertPool, error) {
	r, err := newReloader("client CA bundle", func() (*x509.CertPool, error) { return LoadClientCAs(path) }, logger, path)
	if err != nil {
		return nil, err
	}
	return r.get, nil
}

// StaticCAs is a client CA pool that never changes.
func StaticCAs(p *x509.CertPool) func() *x509.CertPool { return func() *x509.CertPool { return p } }
