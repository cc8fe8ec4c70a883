package image

import (
	"context"
	"fmt"
	"strings"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Policy is the image policy the store enforces (nil: everything enters).
func (s *Store) Policy() *policy.Policy { return s.policy.Load() }

// SetPolicy makes p the policy every image arriving from now on must meet,
// and checks the images already in the store against it, offline, with the
// signatures each arrived with (recordLocked), recording each verdict
// (Image.Verification). A refused image stays in the store (it may be what a
// running container was made from) but Prepare refuses it. It returns the
// images it now refuses.
func (s *Store) SetPolicy(p *policy.Policy) ([]Image, error) {
	s.policy.Store(p)
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	var refused []Image
	changed := false
	for i := range idx.Images {
		img := &idx.Images[i]
		v := s.recheck(p, *img)
		if img.Verification == nil || *img.Verification != v {
			img.Verification = &v
			changed = true
		}
		if v.Decision == policy.Rejected {
			refused = append(refused, *img)
		}
	}
	if changed {
		if err := s.writeIndexLocked(idx); err != nil {
			return nil, fmt.Errorf("record image verification: %w", err)
		}
	}
	return refused, nil
}

// recheck decides on img as it arrived, under p: a pulled image under the
// docker transport by each of its references (each a scope of its own, all
// of which must pass), an imported one under its archive transport with no
// scope of its own (the archive's path is gone). An image the store got
// before it recorded transports counts as pulled if it has a repo digest,
// else as imported from an OCI archive.
func (s *Store) recheck(p *policy.Policy, img Image) policy.Verdict {
	transport := img.Transport
	if transport == "" {
		transport = policy.TransportOCIArchive
		if len(img.RepoDigests) > 0 {
			transport = policy.TransportDocker
		}
	}
	var sigs []policy.Signature
	if img.Digest != "" {
		var err error
		if sigs, err = s.readSignatures(img.Digest); err != nil {
			s.logger.Warn("cannot read an image's kept signatures; checking it without them", "image", img.ID, "err", err)
		}
	}
	names := img.Refs
	if transport == policy.TransportDocker && len(names) == 0 {
		names = img.RepoDigests
	}
	if len(names) == 0 {
		names = []string{""}
	}
	var out policy.Verdict
	for _, name := range names {
		pi := policy.Image{Transport: transport, Reference: name, Digest: img.Digest, Signatures: sigs}
		if transport == policy.TransportDocker {
			pi.Scope = name
		}
		v := p.Evaluate(context.Background(), pi)
		switch {
		case v.Decision == policy.Rejected:
			if len(names) > 1 {
				v.Reason = name + ": " + v.Reason
			}
			return v
		case v.Decision == policy.Verified && out.Decision != policy.Verified:
			out = v
		case out.Decision == "":
			out = v
		}
	}
	return out
}

// admit decides whether img may enter the store, before anything of it is
// staged or fetched beyond its manifest and signatures: a refusal's error
// wraps policy.ErrSignatureValidationFailed and leaves the store unchanged.
func (s *Store) admit(ctx context.Context, img policy.Image) (policy.Verdict, error) {
	v := s.Policy().Evaluate(ctx, img)
	return v, v.Err()
}

// admitArchived decides on an image of an archive found under scope (the
// archive's absolute path, "" for a stream), and records the verdict in
// src for commit. A refusal says which image, and why, in the policy's words
// and with what the archive lacks.
func (s *Store) admitArchived(ctx context.Context, scope string, src *source) error {
	a := &src.admitted
	a.img.Scope = scope
	v, err := s.admit(ctx, a.img)
	if err == nil {
		a.verdict = v
		return nil
	}
	if a.img.Transport == policy.TransportDockerArchive && s.Policy().NeedsSignatures(a.img.Transport, scope) {
		v.Reason = "docker-archive carries no signatures; use an OCI archive: " + v.Reason
	}
	if len(a.sigErrs) > 0 {
		v.Reason += fmt.Sprintf(" (%d signatures in the archive could not be read; the first: %s)", len(a.sigErrs), bounded(a.sigErrs[0].Error(), maxReasonDetail))
	}
	name := a.img.Reference
	if name == "" {
		name = a.img.Digest
	}
	if name == "" {
		name = "with no name or digest"
	}
	return fmt.Errorf("image %s: %w; nothing of the archive was imported", name, v.Err())
}

// maxReasonDetail bounds what of an archive's own error a refusal repeats.
const maxReasonDetail = 256

// bounded cuts s to at most n bytes, on a rune boundary, saying so.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "... (cut)"
}
