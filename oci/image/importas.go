package image

import (
	"context"
	"fmt"
)

// ImportAs is Import for an archive that stands for another: the policy's
// oci-archive scopes are matched against scope instead of path's own name.
// A bundle's images are imported from a layout made in staging, and are
// judged as the bundle file's (its absolute path) or, fetched, as a stream's
// (""), never by where staging happens to be.
func (s *Store) ImportAs(ctx context.Context, path, scope string, opts ...TransferOption) ([]Image, error) {
	imgs, err := s.importStaged(ctx, scope, func(string, *space) (string, error) { return path, nil }, newMeter(transferOpts(opts)))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return imgs, nil
}
