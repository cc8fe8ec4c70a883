package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Limits bound what the clients of one listener can hold of the daemon.
type Limits struct {
	// MaxConns is how many connections are served at once (0: no cap). The
	// next one waits, not accepted, in the kernel's listen backlog until one
	// of them closes.
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's headers (a client that
	// sends them a byte at a time), ReadTimeout the whole request.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds a response, from the end of the request's headers,
	// for a client that does not read it. Streams lift it (see stream).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request.
	IdleTimeout    time.Duration
	MaxHeaderBytes int

	// TLS only (ServeTLS): MaxConns counts handshaken connections. At most
	// MaxHandshakes handshakes are in progress at once (the next connections
	// wait in the listen backlog), each within HandshakeTimeout. At most
	// MaxHandshakesPerAddr connections from one client address are in their
	// handshake or handshaken with no request authorized yet (the next is
	// closed at once and counted in HandshakesRefused). Zero values: the
	// shortest read or write timeout, as net/http; half of MaxConns; no
	// bound per address; not counted.
	HandshakeTimeout     time.Duration
	MaxHandshakes        int
	MaxHandshakesPerAddr int
	HandshakesRefused    *atomic.Uint64
}

// Connection caps: the read-only port is for scrapers and scripts, the CLI
// socket for a root shell's ps and logs -f. Each also stays under an eighth of
// the open-file limit (FitFiles).
const (
	ReadOnlyMaxConns = 128
	CLIMaxConns      = 32
)

// DefaultLimits are the timeouts of every listener, with a connection cap.
// The kubelet's server.go gives both its ports a 90s IdleTimeout (that of
// http.DefaultTransport, so a Go client closes an idle connection first), 1 MiB
// of headers, and 4h to read and write because its streams (logs -f, exec) run
// under them. Here the one stream, /containerLogs on the CLI socket, lifts its
// own write deadline, so every other request gets what a /pods of any size
// needs.
// Headers: no client of these endpoints sends more than a few KiB.
func DefaultLimits(maxConns int) Limits {
	return Limits{
		MaxConns:          maxConns,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// A handshake is one or two round trips and a signature: a few
		// milliseconds on the networks an appliance sits on, under 2 s over
		// a 500 ms satellite link. 5 s is half of Go's client
		// TLSHandshakeTimeout, which net/http's server would otherwise take
		// from ReadHeaderTimeout.
		HandshakeTimeout: 5 * time.Second,
		// Half the cap: a listener then holds at most 1.5 times MaxConns
		// descriptors, and FitFiles keeps that within its share.
		MaxHandshakes: max(maxConns/2, 1),
		// A client opens one connection, a scraper or a proxy a few.
		MaxHandshakesPerAddr: 8,
		HandshakesRefused:    new(atomic.Uint64),
	}
}

// filesPerConnShare: a listener may hold at most 1/filesPerConnShare of the
// open-file limit, so the four (CLI socket, read-only port, healthz port,
// node API) together leave at least half of the descriptors to the pods,
// their logs and the image store.
const filesPerConnShare = 8

// FitFiles returns l with MaxConns lowered, if need be, to an eighth of the
// open-file limit nofile (at least one connection), and MaxHandshakes to half
// of MaxConns.
func (l Limits) FitFiles(nofile uint64) Limits {
	if share := nofile / filesPerConnShare; uint64(l.MaxConns) > share {
		l.MaxConns = int(max(share, 1))
	}
	l.MaxHandshakes = min(l.MaxHandshakes, max(l.MaxConns/2, 1))
	return l
}

// Serve serves h on l within lim until ctx ends; then it stops accepting,
// gives open requests 5s to finish, and closes what is left.
func Serve(ctx context.Context, l net.Listener, h http.Handler, lim Limits, logger *slog.Logger) error {
	return serve(ctx, l, h, nil, lim, logger)
}

// ServeTLS is Serve with TLS. Only handshaken connections count against the
// connection cap; handshakes are bounded in time, in number and per client
// address (Limits), so that clients without credentials cannot hold the cap.
func ServeTLS(ctx context.Context, l net.Listener, h http.Handler, tc *tls.Config, lim Limits, logger *slog.Logger) error {
	return serve(ctx, l, h, tc, lim, logger)
}

func serve(ctx context.Context, l net.Listener, h http.Handler, tc *tls.Config, lim Limits, logger *slog.Logger) error {
	switch {
	case tc != nil:
		// Its connections are *tls.Conn, handshake done: net/http sets
		// Request.TLS from them.
		l = newHandshakeListener(l, tc, lim, logger)
	case lim.MaxConns > 0:
		l = newLimitListener(l, lim.MaxConns, logger)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ConnContext:       withConn,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			srv.Close() // streams such as logs -f do not end by themselves
		}
	}()
	err := srv.Serve(l)
	close(served)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve %s: %w", l.Addr(), err)
}

// stream marks h as a stream, which lasts as long as its client reads: the
// listener's WriteTimeout, meant for requests, is lifted for it. (Its read
// deadline is gone already: net/http clears it once the request is read.)
func stream(h http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Time{}); err != nil {
			logger.Debug("stream keeps the listener's write deadline", "path", r.URL.Path, "err", err)
		}
		h.ServeHTTP(w, r)
	})
}
