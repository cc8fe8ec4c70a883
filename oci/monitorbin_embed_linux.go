//go:build linux && cgo && embedmonitor

package oci

import _ "embed"

// monitorBinary is the monitor's own program (oci/monitor/exe), built
// before this package by `make build`; see monitorExecutable.
//
//go:embed monitor/exe/staticpodd-monitor
var monitorBinary []byte
