package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeListener is a TLS listener whose connection cap counts only
// connections that finished their handshake, so that clients without
// credentials, which never finish one, cannot hold the cap. It accepts from
// the kernel in its own goroutine and runs each handshake under a deadline;
// at most maxPending handshakes are in progress at once (then it stops
// accepting and the next connections wait in the listen backlog), and at
// most perAddr of them from one client address (a /64 for IPv6): the
// address's next connection is closed at once, unread. A handshaken
// connection is handed to Accept once one of the cap's slots is free; until
// then it still counts as in progress.
type handshakeListener struct {
	raw     net.Listener
	cfg     *tls.Config
	timeout time.Duration
	perAddr int
	logger  *slog.Logger
	refused *atomic.Uint64 // connections closed because their address was at perAddr

	pending chan struct{} // a token per connection accepted and not yet served
	slots   chan struct{} // a token per served connection; nil: no cap
	ready   chan net.Conn // handshaken connections holding a slot
	ctx     context.Context
	cancel  context.CancelFunc // by Close: ends the handshakes in progress
	done    chan struct{}      // closed by Close or when the raw listener fails for good
	once    sync.Once

	mu       sync.Mutex     // guards the fields below
	byAddr   map[string]int // handshakes in progress by client address
	full     bool           // the last handshaken connection had to wait for a slot
	warnedAt time.Time      // when a refusal was last logged
}

func newHandshakeListener(raw net.Listener, cfg *tls.Config, lim Limits, logger *slog.Logger) *handshakeListener {
	if lim.HandshakeTimeout <= 0 {
		// net/http's rule (Server.tlsHandshakeTimeout): the shortest of
		// the read and write timeouts.
		for _, d := range []time.Duration{lim.ReadHeaderTimeout, lim.ReadTimeout, lim.WriteTimeout} {
			if d > 0 && (lim.HandshakeTimeout <= 0 || d < lim.HandshakeTimeout) {
				lim.HandshakeTimeout = d
			}
		}
	}
	if lim.MaxHandshakes <= 0 {
		lim.MaxHandshakes = max(lim.MaxConns/2, 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &handshakeListener{
		raw: raw, cfg: cfg, timeout: lim.HandshakeTimeout, perAddr: lim.MaxHandshakesPerAddr,
		logger: logger, refused: lim.HandshakesRefused,
		pending: make(chan struct{}, lim.MaxHandshakes),
		ready:   make(chan net.Conn),
		ctx:     ctx, cancel: cancel,
		done:   make(chan struct{}),
		byAddr: map[string]int{},
	}
	if l.refused == nil {
		l.refused = new(atomic.Uint64)
	}
	if lim.MaxConns > 0 {
		l.slots = make(chan struct{}, lim.MaxConns)
	}
	go l.run()
	return l
}

func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handshakeListener) Close() error {
	l.stop()
	return l.raw.Close()
}

func (l *handshakeListener) stop() {
	l.once.Do(func() {
		l.cancel()
		close(l.done)
	})
}

func (l *handshakeListener) Addr() net.Addr { return l.raw.Addr() }

// run accepts connections and starts their handshakes until the listener is
// closed. A failed accept (too many open files) is tried again after a pause
// that doubles up to a second, as net/http's Server.Serve does.
func (l *handshakeListener) run() {
	var pause time.Duration
	for {
		select {
		case l.pending <- struct{}{}:
		case <-l.done:
			return
		}
		c, err := l.raw.Accept()
		if err != nil {
			<-l.pending
			if errors.Is(err, net.ErrClosed) {
				l.stop()
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.logger.Warn("accept failed; trying again", "address", l.Addr().String(), "err", err, "after", pause)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		pause = 0
		key := addrKey(c.RemoteAddr())
		if !l.admit(key) {
			c.Close()
			<-l.pending
			continue
		}
		go l.handshake(c, key)
	}
}

// admit counts a handshake for key, or refuses it when key has perAddr.
func (l *handshakeListener) admit(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perAddr > 0 && l.byAddr[key] >= l.perAddr {
		n := l.refused.Add(1)
		// One line when refusals start and at most one a minute while they
		// go on: the refused clients must not flood the log either.
		if now := time.Now(); now.Sub(l.warnedAt) >= time.Minute {
			l.warnedAt = now
			l.logger.Warn("TLS handshakes refused: too many in progress from one address",
				"address", l.Addr().String(), "client", key, "maxPerAddress", l.perAddr, "refusedTotal", n)
		}
		return false
	}
	l.byAddr[key]++
	return true
}

// release ends the count of key's handshake and gives its pending token back.
func (l *handshakeListener) release(key string) {
	l.mu.Lock()
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
	l.mu.Unlock()
	<-l.pending
}

// handshake finishes c's TLS handshake within the deadline, waits for a slot
// and hands the connection to Accept; a connection that fails, or whose
// listener closes first, is closed.
func (l *handshakeListener) handshake(c net.Conn, key string) {
	sc := &slotConn{Conn: c}
	tc := tls.Server(sc, l.cfg)
	if l.timeout > 0 {
		c.SetDeadline(time.Now().Add(l.timeout))
	}
	if err := tc.HandshakeContext(l.ctx); err != nil {
		tc.Close()
		l.release(key)
		return
	}
	c.SetDeadline(time.Time{}) // net/http sets its own from here on
	if l.slots != nil {
		if !l.takeSlot() {
			tc.Close()
			l.release(key)
			return
		}
		sc.release = func() { <-l.slots }
	}
	l.release(key)
	select {
	case l.ready <- tc:
	case <-l.done:
		tc.Close()
	}
}

// takeSlot waits for a free slot of the cap, false when the listener closes
// first. It logs when the cap is reached and when there is room again.
func (l *handshakeListener) takeSlot() bool {
	select {
	case l.slots <- struct{}{}:
		l.mu.Lock()
		if l.full {
			l.full = false
			l.logger.Info("listener below its connection limit again", "address", l.Addr().String(), "maxConns", cap(l.slots))
		}
		l.mu.Unlock()
		return true
	default:
	}
	l.mu.Lock()
	if !l.full {
		l.full = true
		l.logger.Warn("listener at its connection limit; new connections wait until one closes",
			"address", l.Addr().String(), "maxConns", cap(l.slots))
	}
	l.mu.Unlock()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

// slotConn gives its slot back, if it got one, when it is closed. release is
// set before the connection is handed to Accept and never after.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
	return err
}

// addrKey is the client address a handshake counts against: an IPv4 address,
// or an IPv6 /64 (what one host is commonly given, and can pick addresses
// from at will).
func addrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return (&net.IPNet{IP: ta.IP.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}
