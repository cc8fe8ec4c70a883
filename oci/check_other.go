//go:build !linux || !cgo

package oci

import "errors"

var checks []check

// Check fails: pods need Linux.
func Check(CheckConfig) []error { return []error{errors.ErrUnsupported} }
