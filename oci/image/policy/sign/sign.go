// Package sign makes the signatures policy verifies, on a build machine:
// cosign's simple-signing signatures and sigstore bundles, with a private
// key the operator holds.
package sign

import (
	"errors"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Signer signs with one private key.
type Signer struct{}

// Load reads a private key: PKCS#8, EC or PKCS#1 PEM, or cosign's encrypted
// key (password from the caller, e.g. $COSIGN_PASSWORD).
func Load(path string, password []byte) (*Signer, error) {
	return nil, errors.ErrUnsupported
}

// Cosign signs digest as the image named ref (the identity a policy's
// signedIdentity matches), in cosign's simple-signing format.
func (s *Signer) Cosign(ref, digest string) (policy.Signature, error) {
	return policy.Signature{}, errors.ErrUnsupported
}

// Bundle signs digest in a sigstore bundle (a message signature over the
// digest), verifiable offline with the public key alone.
func (s *Signer) Bundle(digest string) (policy.Signature, error) {
	return policy.Signature{}, errors.ErrUnsupported
}

// PublicKeyPEM is the key's public half, as policy's keyPath reads it.
func (s *Signer) PublicKeyPEM() ([]byte, error) {
	return nil, errors.ErrUnsupported
}
