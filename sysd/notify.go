// Package sysd tells systemd how staticpodd is doing (sd_notify), logs to the journal,
// takes sockets passed by socket activation and detects a booted systemd. Every part is a
// no-op when the process does not run under systemd.
package sysd

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends sd_notify(3) messages to the service manager. All methods are safe for
// concurrent use and do nothing when NOTIFY_SOCKET is unset. Sending never fails the
// caller: the first error is logged at debug level, later ones are dropped.
type Notifier struct {
	logger   *slog.Logger
	enabled  bool          // NOTIFY_SOCKET was set at New
	interval time.Duration // half of WATCHDOG_USEC; 0 when the watchdog is off

	mu           sync.Mutex // guards the fields below
	ready        bool       // READY=1 sent since start or the last RELOADING=1
	status       string     // last STATUS= sent
	lastWatchdog time.Time  // when WATCHDOG=1 was last sent; zero if never
	errLogged    bool       // a send error was already logged
}

// New reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the environment.
// A nil logger discards.
func New(logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{logger: logger, enabled: os.Getenv("NOTIFY_SOCKET") != ""}
	if !n.enabled {
		return n
	}
	usec, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		logger.Warn("systemd watchdog disabled: bad environment", "err", err)
		return n
	}
	n.interval = usec / 2
	return n
}

// Enabled reports whether the process runs under a service manager that listens to
// sd_notify messages.
func (n *Notifier) Enabled() bool { return n.enabled }

// WatchdogInterval is how often Watchdog must be called to keep systemd's watchdog
// satisfied: half of WATCHDOG_USEC, or 0 when the watchdog is off.
func (n *Notifier) WatchdogInterval() time.Duration { return n.interval }

// Ready sends READY=1 with the last status once; later calls do nothing until Reloading
// is called, after which the next Ready completes the reload.
func (n *Notifier) Ready() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.enabled || n.ready {
		return
	}
	n.ready = true
	status := n.status
	if status == "" {
		status = "Ready"
	}
	n.sendLocked(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

// Status sends a one-line STATUS= shown by systemctl status. Newlines become spaces.
func (n *Notifier) Status(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.enabled {
		return
	}
	n.status = oneLine(s)
	n.sendLocked("STATUS=" + n.status)
}

// Watchdog sends WATCHDOG=1 unless it was sent less than about WatchdogInterval ago. Call it
// from the loop whose progress it vouches for, never from a ticker of its own, so that a
// wedged loop gets the service restarted.
func (n *Notifier) Watchdog() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.enabled || n.interval == 0 {
		return
	}
	now := time.Now()
	// A tenth of slack, so that a caller ticking at the interval or a fraction
	// of it is not dropped for arriving a hair early.
	if !n.lastWatchdog.IsZero() && now.Sub(n.lastWatchdog) < n.interval-n.interval/10 {
		return
	}
	n.lastWatchdog = now
	n.sendLocked(daemon.SdNotifyWatchdog)
}

// Reloading sends RELOADING=1 with MONOTONIC_USEC, as Type=notify-reload requires.
// Call Ready when the reload is done.
func (n *Notifier) Reloading() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.enabled {
		return
	}
	n.ready = false
	n.status = "Reloading"
	n.sendLocked(daemon.SdNotifyReloading + "\n" + daemon.SdNotifyMonotonicUsec() + "STATUS=" + n.status)
}

// ExtendTimeout sends EXTEND_TIMEOUT_USEC: systemd waits d more for the current
// state (starting, reloading, stopping) before its timeout applies; it never
// shortens the configured one. Send it again before d passes to extend further.
func (n *Notifier) ExtendTimeout(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.enabled || d <= 0 {
		return
	}
	n.sendLocked(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", d.Microseconds()))
}

// Stopping sends STOPPING=1.
func (n *Notifier) Stopping() { n.StoppingBecause("") }

// StoppingBecause sends STOPPING=1 with a STATUS= that says why, when there
// is more to say than that the daemon stops: it is the unit's last status,
// which `systemctl status` shows after a start that timed out.
func (n *Notifier) StoppingBecause(why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.enabled {
		return
	}
	n.status = "Stopping"
	if why != "" {
		n.status += ": " + why
	}
	n.sendLocked(daemon.SdNotifyStopping + "\nSTATUS=" + n.status)
}

func (n *Notifier) sendLocked(state string) {
	_, err := daemon.SdNotify(false, state)
	if err == nil || n.errLogged {
		return
	}
	n.errLogged = true
	n.logger.Debug("sd_notify failed; further failures are not logged", "err", err)
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
