//go:build !testhooks

package monitor

// pauseAt does nothing: the pause points exist only in a build with the
// testhooks tag, the oci tests' (pause_testhooks.go), never in the
// production monitor.
func pauseAt(string) {}
