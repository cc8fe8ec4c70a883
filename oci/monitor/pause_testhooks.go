//go:build testhooks

package monitor

// PauseAt is called at each pause point (PauseRun, PauseExec, PauseDestroy). Only a
// build with the testhooks tag has it: a test binary that is its own
// monitor (package oci's) sets it, in an init.
var PauseAt = func(point string) {}

func pauseAt(point string) { PauseAt(point) }
