//go:build linux && cgo && !testhooks

package oci

// pauseHooks is false without the testhooks tag: the monitor has no pause
// points (requirePauseHooks).
const pauseHooks = false
