//go:build !linux

package image

import (
	"context"
	"errors"
	"io"
)

// Images can be imported and listed anywhere; unpacking layers and mounting
// snapshots need Linux (overlayfs, whiteouts as device nodes, lchown).

type snapshotMeta struct {
	Key    string
	Image  string
	Layers []string
}

func unpack(ctx context.Context, r io.Reader, dir string, sp *space) (int64, string, error) {
	return 0, "", errors.ErrUnsupported
}

func (s *Store) snapshotMetas() ([]snapshotMeta, error) { return nil, nil }

// Prepare needs overlayfs.
func (s *Store) Prepare(key, ref string) (string, Image, error) {
	return "", Image{}, errors.ErrUnsupported
}

// Release needs overlayfs.
func (s *Store) Release(key string) error { return errors.ErrUnsupported }

// Snapshots lists none where there can be none.
func (s *Store) Snapshots() ([]string, error) { return nil, nil }
