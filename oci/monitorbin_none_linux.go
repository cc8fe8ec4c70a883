//go:build linux && cgo && !embedmonitor

package oci

// monitorBinary is empty in a build without the embedmonitor tag (`go
// build`, `go test`): monitors run this binary itself; see
// openMonitorExecutable.
var monitorBinary string
