//go:build !linux

package oci

import "errors"

func detectCgroupHost() (CgroupHost, error) { return CgroupHost{}, errors.ErrUnsupported }
