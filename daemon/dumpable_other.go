//go:build !linux

package daemon

// notDumpable does nothing where there is no prctl: the daemon runs pods on
// Linux only, and elsewhere reads no Secret.
func notDumpable() error { return nil }
