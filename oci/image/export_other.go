//go:build !linux

package image

import (
	"context"
	"errors"
	"io"
)

// tarLayerDir needs Linux: layers are overlay lowerdirs.
func tarLayerDir(context.Context, string, io.Writer) error { return errors.ErrUnsupported }
