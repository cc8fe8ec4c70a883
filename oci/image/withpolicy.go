package image

import "github.com/staticpodd/staticpodd/oci/image/policy"

// WithPolicy makes p the policy every image arriving through the store must
// meet, without checking the images already in it again (SetPolicy does):
// for a command that brings images in beside the daemon, whose verdicts on
// the images it has are the daemon's to make.
func WithPolicy(p *policy.Policy) Option {
	return func(s *Store) { s.policy.Store(p) }
}
