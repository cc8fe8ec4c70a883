package testdaemon

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Output is what the daemon wrote to stdout and stderr so far.
func (d *Daemon) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stderr == nil {
		return ""
	}
	return d.stderr.String()
}

// WaitOutput waits until done is true of the daemon's output and returns
// that output. It checks each time the daemon writes, not on a clock: a log
// line can come through the daemon's pipe a moment after what it tells of
// shows in the status, so a test that wants a line waits for the line. It
// fails the test when the timeout passes or the daemon exits first. For a
// line that must NOT be there, read Output once what comes after it is in.
func (d *Daemon) WaitOutput(timeout time.Duration, what string, done func(out string) bool) string {
	d.T.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		b, exited := d.stderr, d.exited
		d.mu.Unlock()
		if b == nil {
			d.T.Fatalf("waiting for %s in the output of a daemon never started", what)
		}
		out, wake := b.watch()
		if done(out) {
			return out
		}
		select {
		case <-wake:
		case <-exited:
			// cmd.Wait returned: everything the daemon wrote is in b.
			if out := b.String(); done(out) {
				return out
			}
			d.mu.Lock()
			restarted := d.stderr != b
			d.mu.Unlock()
			if !restarted {
				d.T.Fatalf("the daemon exited before its output had %s:\n%s", what, d.OutputTail())
			}
		case <-deadline.C:
			d.T.Fatalf("waited %s for %s in the daemon's output:\n%s", timeout, what, d.OutputTail())
		}
	}
}

// WaitLine waits until a line of the daemon's output holds every one of subs,
// and returns that line.
func (d *Daemon) WaitLine(timeout time.Duration, subs ...string) string {
	d.T.Helper()
	var line string
	d.WaitOutput(timeout, fmt.Sprintf("a line with %q", subs), func(out string) bool {
		line = ""
		for l := range strings.Lines(out) {
			if hasAll(l, subs) {
				line = strings.TrimSuffix(l, "\n")
				return true
			}
		}
		return false
	})
	return line
}

func hasAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// OutputTail is the end of Output, at most maxShownOutput bytes.
func (d *Daemon) OutputTail() string {
	out := d.Output()
	if len(out) <= maxShownOutput {
		return out
	}
	return fmt.Sprintf("[%d bytes before this]\n", len(out)-maxShownOutput) + out[len(out)-maxShownOutput:]
}

// lockedBuffer is the daemon's output: written by exec's copying goroutine,
// read by Output at any time. wake is closed, and replaced, at each write,
// for WaitOutput; closed for good once a daemon started again writes
// elsewhere.
type lockedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	wake    chan struct{}
	retired bool
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake != nil && !b.retired {
		close(b.wake)
		b.wake = nil
	}
	return b.buf.Write(p)
}

// watch returns the output so far and a channel closed at the next write.
func (b *lockedBuffer) watch() (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake == nil {
		b.wake = make(chan struct{})
		if b.retired {
			close(b.wake)
		}
	}
	return b.buf.String(), b.wake
}

// retire wakes every watcher for good: the daemon's output goes elsewhere.
func (b *lockedBuffer) retire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.retired && b.wake != nil {
		close(b.wake)
	}
	b.retired = true
	b.wake = nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
