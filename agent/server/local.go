package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
)

// Local serves a handler inside this process, to connections Dial makes:
// each is one end of a unix socket pair, so that a client (an exec's
// upgraded connection included) cannot tell it from the CLI socket. The
// command line serves itself the CLI socket's API so while no daemon runs.
type Local struct {
	srv  *http.Server
	ln   *localListener
	done chan struct{}
}

// NewLocal starts serving h; Close stops it.
func NewLocal(h http.Handler) *Local {
	l := &Local{
		srv:  &http.Server{Handler: h},
		ln:   &localListener{conns: make(chan net.Conn), closed: make(chan struct{})},
		done: make(chan struct{}),
	}
	go func() {
		defer close(l.done)
		_ = l.srv.Serve(l.ln)
	}()
	return l
}

// Dial connects to the handler.
func (l *Local) Dial(ctx context.Context) (net.Conn, error) {
	fds, err := socketpair()
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ends := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "local")
		ends[i], err = net.FileConn(f) // a dup: f is closed either way
		f.Close()
		if err != nil {
			for _, c := range ends[:i] {
				c.Close()
			}
			if i == 0 {
				syscall.Close(fds[1])
			}
			return nil, fmt.Errorf("socketpair: %w", err)
		}
	}
	select {
	case l.ln.conns <- ends[1]:
		return ends[0], nil
	case <-l.ln.closed:
		err = net.ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	ends[0].Close()
	ends[1].Close()
	return nil, err
}

// Close stops serving, ending the connections, hijacked ones aside.
func (l *Local) Close() error {
	err := l.srv.Close()
	<-l.done
	return err
}

// localListener is the listener of Local: Accept takes what Dial hands it.
type localListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *localListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *localListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *localListener) Addr() net.Addr { return &net.UnixAddr{Name: "local", Net: "unix"} }
