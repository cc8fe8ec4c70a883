//go:build linux && cgo

package oci

import "github.com/staticpodd/staticpodd/oci/image"

// The image store plugs in as it is.
var _ ImageStore = (*image.Store)(nil)
