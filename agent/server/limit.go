package server

import (
	"log/slog"
	"net"
	"sync"
)

// limitListener serves at most cap(sem) connections at once: Accept waits for
// one of them to close before it takes the next from the kernel's listen
// backlog, so the clients of one listener cannot take every file descriptor of
// the daemon. It is golang.org/x/net/netutil.LimitListener, plus a log line
// when the listener becomes full and when it has room again.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	logger    *slog.Logger
	full      bool // the last Accept had to wait; only Accept uses it (http.Server calls it from one goroutine)
}

func newLimitListener(l net.Listener, n int, logger *slog.Logger) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{}), logger: logger}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
		if l.full {
			l.full = false
			l.logger.Info("listener below its connection limit again", "address", l.Addr().String(), "maxConns", cap(l.sem))
		}
	default:
		if !l.full {
			l.full = true
			l.logger.Warn("listener at its connection limit; new connections wait until one closes",
				"address", l.Addr().String(), "maxConns", cap(l.sem))
		}
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its listener's slot back when it is closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// LimitListener is l serving at most n connections at once, as Serve's
// listeners do with Limits.MaxConns: for servers other than net/http's (the
// CRI socket's gRPC).
func LimitListener(l net.Listener, n int, logger *slog.Logger) net.Listener {
	return newLimitListener(l, n, logger)
}
