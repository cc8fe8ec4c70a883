//go:build !linux || !cgo

// Command staticpodd-monitor is the program a container's monitor and its
// init run as. Containers need Linux and cgo: elsewhere it only says so.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "staticpodd-monitor: containers need Linux and cgo")
	os.Exit(2)
}
