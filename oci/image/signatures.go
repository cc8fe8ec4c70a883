package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// signatureSet is what signatures/<hex>.json holds: the signatures an image's
// manifest digest arrived with, kept so that a policy set later can verify
// the image again offline (SetPolicy), with no registry or archive at hand.
type signatureSet struct {
	Digest     string             `json:"digest"`
	Signatures []policy.Signature `json:"signatures"`
}

// maxSignatureFile bounds what is read of one signatures file: the
// signatures of both kinds an image may keep, base64 in JSON.
const maxSignatureFile = 2 * policy.MaxSignatures * (policy.MaxSignatureBytes*4/3 + 8<<10)

func (s *Store) signaturesDir() string { return filepath.Join(s.root, "signatures") }

func (s *Store) signaturesPath(digest string) string {
	return filepath.Join(s.signaturesDir(), digestHex(digest)+".json")
}

// recordLocked records on idx.Images[i] how it arrived and the policy's
// verdict (Image.Digest, Image.Transport, Image.Verification), and keeps the
// signatures it arrived with beside those already kept for its digest, for
// SetPolicy to verify it again. The caller holds the store lock and writes
// idx afterwards; a signatures file whose image is not written is removed by
// the next index write. An image that arrived without a decision (a zero a)
// keeps what it had.
//
// The verdict is made again here, under the lock SetPolicy's recheck takes:
// a policy set while the image was fetched or staged decides on it too, so
// no arrival slips in under the policy it was admitted by. A refusal now is
// an error: the caller writes nothing.
func (s *Store) recordLocked(idx *index, i int, a admitted) error {
	if a.verdict.Decision == "" {
		return nil
	}
	img := &idx.Images[i]
	v := s.Policy().Evaluate(context.Background(), a.img)
	if err := v.Err(); err != nil {
		return fmt.Errorf("image %s: %w", img.ID, err)
	}
	if a.img.Digest != "" {
		if err := checkDigest(a.img.Digest); err != nil {
			return fmt.Errorf("record image %s: manifest %w", img.ID, err)
		}
		if err := s.keepSignatures(a.img.Digest, a.img.Signatures); err != nil {
			return fmt.Errorf("record image %s: %w", img.ID, err)
		}
	}
	img.Digest = a.img.Digest
	img.Transport = a.img.Transport
	if a.img.Transport == policy.TransportDocker {
		// The store keeps one verdict per image, and a registry image is
		// judged by each name it has, as SetPolicy judges it: a pull by a
		// name the policy accepts does not clear a refusal under another.
		v = s.recheck(s.Policy(), *img)
	}
	img.Verification = &v
	return nil
}

// keepSignatures adds sigs to those kept for digest, each once, at most
// policy.MaxSignatures of each kind (the newest arrival's first).
func (s *Store) keepSignatures(digest string, sigs []policy.Signature) error {
	if len(sigs) == 0 {
		return nil
	}
	old, err := s.readSignatures(digest)
	if err != nil {
		// What cannot be read is replaced: the new signatures are the
		// ones the verdict just recorded was made on.
		s.logger.Warn("replacing unreadable kept signatures", "digest", digest, "err", err)
		old = nil
	}
	set := signatureSet{Digest: digest}
	perKind := map[string]int{}
	for _, sig := range append(sigs, old...) {
		if perKind[sig.Kind] >= policy.MaxSignatures || containsSignature(set.Signatures, sig) {
			continue
		}
		perKind[sig.Kind]++
		set.Signatures = append(set.Signatures, sig)
	}
	b, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("keep signatures of %s: %w", digest, err)
	}
	if err := atomicfile.Write(s.signaturesPath(digest), b); err != nil {
		return fmt.Errorf("keep signatures of %s: %w", digest, err)
	}
	return nil
}

func containsSignature(sigs []policy.Signature, sig policy.Signature) bool {
	for _, o := range sigs {
		if o.Kind == sig.Kind && bytes.Equal(o.Payload, sig.Payload) && bytes.Equal(o.Signature, sig.Signature) {
			return true
		}
	}
	return false
}

// readSignatures reads the signatures kept for digest: none if there are
// none.
func (s *Store) readSignatures(digest string) ([]policy.Signature, error) {
	if err := checkDigest(digest); err != nil {
		return nil, err
	}
	f, err := os.Open(s.signaturesPath(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read signatures of %s: %w", digest, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSignatureFile+1))
	if err != nil {
		return nil, fmt.Errorf("read signatures of %s: %w", digest, err)
	}
	if len(b) > maxSignatureFile {
		return nil, fmt.Errorf("read signatures of %s: more than %d bytes", digest, maxSignatureFile)
	}
	var set signatureSet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("read signatures of %s: %w", digest, err)
	}
	if set.Digest != digest {
		return nil, fmt.Errorf("read signatures of %s: file is for %s", digest, set.Digest)
	}
	return set.Signatures, nil
}

// pruneSignatures removes the signatures kept for digests no image of idx
// has any more.
func (s *Store) pruneSignatures(idx index) error {
	entries, err := os.ReadDir(s.signaturesDir())
	if err != nil {
		return fmt.Errorf("list kept signatures: %w", err)
	}
	used := map[string]bool{}
	for _, img := range idx.Images {
		if img.Digest != "" {
			used[digestHex(img.Digest)+".json"] = true
		}
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		hex, ok := strings.CutSuffix(name, ".json")
		if !ok || checkDigest("sha256:"+hex) != nil || used[name] {
			continue // not a file this store made, or still used
		}
		if err := os.Remove(filepath.Join(s.signaturesDir(), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
