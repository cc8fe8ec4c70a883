package bundle

import (
	"context"
	"errors"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// pullBundle fetches the bundle pushed at the OCI reference ref into the
// layout dir.
func pullBundle(ctx context.Context, ref, dir string, opts ApplyOptions) (policy.Image, error) {
	return policy.Image{}, errors.New("applying a bundle from a registry is not implemented yet")
}
