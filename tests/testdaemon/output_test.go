package testdaemon

import (
	"strings"
	"testing"
	"time"
)

// lineAfterFirstCheck wraps done so that write runs once the waiter has
// looked at the output once and not found what it waits for.
func lineAfterFirstCheck(done func(string) bool, write func()) func(string) bool {
	calls := 0
	return func(out string) bool {
		calls++
		ok := done(out)
		if calls == 1 && !ok {
			go write()
		}
		return ok
	}
}

// A line written after the waiter first read the output, in two pieces,
// wakes it: WaitOutput does not read once, and sees the whole line.
func TestWaitOutputWokenByWrite(t *testing.T) {
	d := &Daemon{T: t, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	d.stderr.Write([]byte("level=INFO msg=before\n"))
	const line = `level=INFO msg="pod started" pod=web`
	out := d.WaitOutput(time.Minute, "the line", lineAfterFirstCheck(
		func(out string) bool { return strings.Contains(out, line+"\n") },
		func() {
			d.stderr.Write([]byte(line[:20]))
			d.stderr.Write([]byte(line[20:] + "\nlevel=INFO msg=after\n"))
		}))
	if !strings.HasPrefix(out, "level=INFO msg=before\n"+line+"\n") {
		t.Errorf("WaitOutput returned %q", out)
	}
}

// A daemon started again writes to a new buffer: the waiter on the old one
// is woken and reads the new one.
func TestWaitLineAcrossRestart(t *testing.T) {
	d := &Daemon{T: t, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	d.stderr.Write([]byte("level=INFO msg=first\n"))
	var got string
	d.WaitOutput(time.Minute, "the second daemon's line", lineAfterFirstCheck(
		func(out string) bool {
			for l := range strings.Lines(out) {
				if strings.Contains(l, "msg=second") {
					got = l
					return true
				}
			}
			return false
		},
		func() {
			d.mu.Lock()
			d.stderr.retire()
			d.stderr = &lockedBuffer{}
			d.mu.Unlock()
			d.stderr.Write([]byte("level=INFO msg=second\n"))
		}))
	if got != "level=INFO msg=second\n" {
		t.Errorf("got %q", got)
	}
	if line := d.WaitLine(time.Minute, "msg=second"); line != "level=INFO msg=second" {
		t.Errorf("WaitLine returned %q", line)
	}
}
