//go:build !linux || !cgo

package main

func quickExecNames() ([]string, int) { return nil, 0 }

// haveQuickExec says the quick exec is linked in.
const haveQuickExec = false
