//go:build linux && cgo && embedmonitor

package oci

import _ "embed"

// monitorBinary is the monitor's own program (oci/monitor/exe), built
// before this package by `make build`; see openMonitorExecutable. A string, so
// that the linker puts it with the binary's read-only data, whose pages the
// daemon can give back once it has copied them (a []byte would be writable
// data, which stays mapped).
//
//go:embed monitor/exe/staticpodd-monitor
var monitorBinary string
