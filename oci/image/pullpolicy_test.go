package image

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// requireKey is a policy under which the registry host's images must be
// signed by key (the signature naming the image as it is pulled, by tag or
// by its repository for a digest, the default identity), and everything
// else is refused.
func requireKey(t *testing.T, host string, key testKey) *policy.Policy {
	t.Helper()
	doc := fmt.Sprintf(`{"default": [{"type": "reject"}],
 "transports": {"docker": {%q: [{"type": "sigstoreSigned", "keyPath": %q}]}}}`,
		host, key.pub)
	p, err := policy.Parse([]byte(doc), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signCosign pushes a cosign signature by key of digest, naming the image
// ref (repo:tag), at the tag scheme's tag of at (digest, unless a signature
// for another digest is placed where digest's is looked for).
func signCosign(t *testing.T, reg *testRegistry, ref string, key testKey, digest, at string) {
	t.Helper()
	repo, _, _ := strings.Cut(ref, ":")
	sig, err := key.signer.Cosign(reg.host+"/"+ref, digest)
	if err != nil {
		t.Fatal(err)
	}
	img, err := policy.SignatureImage([]policy.Signature{sig})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := policy.SignatureTag(at)
	if err != nil {
		t.Fatal(err)
	}
	reg.push(t, repo+":"+tag, img)
}

// signBundle attaches to subject a sigstore bundle by key over digest (the
// subject's own, unless a signature for another digest is attached).
func signBundle(t *testing.T, reg *testRegistry, repo string, key testKey, digest string, subject v1.Descriptor) {
	t.Helper()
	sig, err := key.signer.Bundle(digest)
	if err != nil {
		t.Fatal(err)
	}
	art, err := policy.BundleArtifact(sig.Payload, subject)
	if err != nil {
		t.Fatal(err)
	}
	d, err := art.Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg.push(t, repo+"@"+d.String(), art)
}

func descriptorOf(t *testing.T, img v1.Image) v1.Descriptor {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	return v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: d}
}

// storeState is what a refused pull must leave as it was: the index as
// written, the layers and the kept signatures.
type storeState struct {
	index      string
	layers     []string
	signatures []string
}

func stateOf(t *testing.T, s *Store) storeState {
	t.Helper()
	var st storeState
	b, err := os.ReadFile(s.indexPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	st.index = string(b)
	for _, d := range []struct {
		dir string
		out *[]string
	}{{s.layersDir(), &st.layers}, {s.signaturesDir(), &st.signatures}} {
		es, err := os.ReadDir(d.dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range es {
			*d.out = append(*d.out, e.Name())
		}
	}
	return st
}

func (st storeState) equal(o storeState) bool {
	return st.index == o.index && slices.Equal(st.layers, o.layers) && slices.Equal(st.signatures, o.signatures)
}

// blobLog records the blobs a registry served.
type blobLog struct {
	mu    sync.Mutex
	blobs []string
}

func (l *blobLog) watch(reg *testRegistry) {
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method == http.MethodGet {
			if _, d, ok := strings.Cut(req.URL.Path, "/blobs/"); ok {
				l.mu.Lock()
				l.blobs = append(l.blobs, d)
				l.mu.Unlock()
			}
		}
		next.ServeHTTP(w, req)
	}
	reg.wrap.Store(&f)
}

func (l *blobLog) reset() {
	l.mu.Lock()
	l.blobs = nil
	l.mu.Unlock()
}

// fetched says whether any of img's config and layers was served.
func (l *blobLog) fetched(t *testing.T, img v1.Image) bool {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if slices.Contains(l.blobs, d.Digest.String()) {
			return true
		}
	}
	return false
}

// signedSetup is a registry with the test image at team/app:v1, a store
// whose policy requires the registry's images signed by key, and a puller.
type signedSetup struct {
	reg    *testRegistry
	img    v1.Image
	digest string
	key    testKey
	store  *Store
	puller *Puller
	ref    string
	log    *blobLog
}

func newSignedSetup(t *testing.T, referrers bool) *signedSetup {
	t.Helper()
	reg := newTestRegistry(t, false)
	reg.reg = registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(referrers))
	img := testImage(t)
	reg.push(t, "team/app:v1", img)
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	key := newTestKey(t, "cosign")
	s := openStore(t)
	if _, err := s.SetPolicy(requireKey(t, reg.host, key)); err != nil {
		t.Fatal(err)
	}
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	su := &signedSetup{reg: reg, img: img, digest: d.String(), key: key, store: s,
		puller: NewPuller(s, PullConfig{HostsDir: hosts}, discardLogger()), ref: reg.host + "/team/app:v1", log: &blobLog{}}
	su.log.watch(reg)
	return su
}

// pulled checks that the pull verified and stored the image under its
// verified digest.
func (su *signedSetup) pulled(t *testing.T, got Image, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	want := su.reg.host + "/team/app@" + su.digest
	if got.Digest != su.digest || !slices.Equal(got.RepoDigests, []string{want}) {
		t.Fatalf("pulled Digest %s, RepoDigests %v; want %s", got.Digest, got.RepoDigests, want)
	}
	if got.Verification == nil || got.Verification.Decision != policy.Verified || !strings.Contains(got.Verification.By, "cosign.pub") {
		t.Fatalf("Verification = %+v, want verified by cosign.pub", got.Verification)
	}
	stored, err := su.store.Get(su.ref)
	if err != nil || stored.ID != got.ID || stored.Verification == nil || stored.Verification.Decision != policy.Verified {
		t.Fatalf("stored %+v, %v", stored, err)
	}
}

// refused checks that the pull was refused by the policy, with the CRI's
// error text, before any of the image's blobs was fetched, and that the
// store is as it was.
func (su *signedSetup) refused(t *testing.T, before storeState, err error, detail string) {
	t.Helper()
	if !errors.Is(err, policy.ErrSignatureValidationFailed) || !strings.HasPrefix(err.Error(), "SignatureValidationFailed: ") {
		t.Fatalf("pull error = %v, want a SignatureValidationFailed refusal", err)
	}
	if !strings.Contains(err.Error(), su.reg.host+"/team/app@"+su.digest) || !strings.Contains(err.Error(), detail) {
		t.Fatalf("refusal %q does not name the digest refused and %q", err, detail)
	}
	if len(err.Error()) > maxErrorText+len("... (cut)") {
		t.Fatalf("refusal of %d bytes", len(err.Error()))
	}
	if su.log.fetched(t, su.img) {
		t.Fatalf("a blob of the refused image was fetched: %v", su.log.blobs)
	}
	if after := stateOf(t, su.store); !after.equal(before) {
		t.Fatalf("refused pull changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
}

// The matrix of a registry pull under a policy requiring a key: each way
// signatures travel with the image (cosign's tag, a sigstore bundle among
// the referrers, and the referrers tag where the registry has no referrers
// API), signed by the key, unsigned, signed by another key, and a signature
// for another digest.
func TestPullPolicyMatrix(t *testing.T) {
	kinds := []struct {
		name      string
		referrers bool
		sign      func(t *testing.T, su *signedSetup, key testKey, digest string)
	}{
		{"cosign tag", true, func(t *testing.T, su *signedSetup, key testKey, digest string) {
			signCosign(t, su.reg, "team/app:v1", key, digest, su.digest)
		}},
		{"bundle referrer", true, func(t *testing.T, su *signedSetup, key testKey, digest string) {
			signBundle(t, su.reg, "team/app", key, digest, descriptorOf(t, su.img))
		}},
		{"bundle referrers tag", false, func(t *testing.T, su *signedSetup, key testKey, digest string) {
			signBundle(t, su.reg, "team/app", key, digest, descriptorOf(t, su.img))
		}},
	}
	for _, k := range kinds {
		t.Run(k.name+"/signed by the key", func(t *testing.T) {
			su := newSignedSetup(t, k.referrers)
			k.sign(t, su, su.key, su.digest)
			got, err := su.puller.Pull(t.Context(), su.ref, nil)
			su.pulled(t, got, err)
		})
		t.Run(k.name+"/signed by another key", func(t *testing.T) {
			su := newSignedSetup(t, k.referrers)
			k.sign(t, su, newTestKey(t, "other"), su.digest)
			before := stateOf(t, su.store)
			_, err := su.puller.Pull(t.Context(), su.ref, nil)
			su.refused(t, before, err, "")
		})
		t.Run(k.name+"/signature for another digest", func(t *testing.T) {
			su := newSignedSetup(t, k.referrers)
			other, err := random.Image(64, 1)
			if err != nil {
				t.Fatal(err)
			}
			od, err := other.Digest()
			if err != nil {
				t.Fatal(err)
			}
			k.sign(t, su, su.key, od.String())
			before := stateOf(t, su.store)
			_, err = su.puller.Pull(t.Context(), su.ref, nil)
			su.refused(t, before, err, "")
		})
	}
	t.Run("unsigned", func(t *testing.T) {
		su := newSignedSetup(t, true)
		before := stateOf(t, su.store)
		_, err := su.puller.Pull(t.Context(), su.ref, nil)
		su.refused(t, before, err, "")
	})
}

// A layer the registry serves other than the signed manifest says fails
// the pull on its digest, though the signature verifies: nothing of the
// image enters the store. The blob changed is the gzip header's time, so it
// unpacks to the very same tar: only the compressed digest tells.
func TestPullPolicyTamperedLayer(t *testing.T) {
	su := newSignedSetup(t, true)
	signCosign(t, su.reg, "team/app:v1", su.key, su.digest, su.digest)
	digest, blob := lastBlob(t, su.img)
	if blob[0] != 0x1f || blob[1] != 0x8b {
		t.Fatal("the layer is not gzip")
	}
	tampered := bytes.Clone(blob)
	tampered[4] ^= 0xff // MTIME
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/blobs/"+digest) {
			w.Write(tampered)
			return
		}
		next.ServeHTTP(w, req)
	}
	su.reg.wrap.Store(&f)
	before := stateOf(t, su.store)
	_, err := su.puller.Pull(t.Context(), su.ref, nil)
	if err == nil || errors.Is(err, policy.ErrSignatureValidationFailed) || !strings.Contains(err.Error(), digest) {
		t.Fatalf("pull of a tampered layer: %v; want its digest check to fail", err)
	}
	if after := stateOf(t, su.store); !after.equal(before) {
		t.Fatalf("failed pull changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
}

// A tag moved to an unsigned image after the signed one was pulled is
// refused at its next pull: the verified image keeps the tag, the store is
// unchanged.
func TestPullPolicyTagMoved(t *testing.T) {
	su := newSignedSetup(t, true)
	signCosign(t, su.reg, "team/app:v1", su.key, su.digest, su.digest)
	old, err := su.puller.Pull(t.Context(), su.ref, nil)
	su.pulled(t, old, err)

	moved := testImage(t, baseEntries)
	su.reg.push(t, "team/app:v1", moved)
	md, err := moved.Digest()
	if err != nil {
		t.Fatal(err)
	}
	su.log.reset()
	before := stateOf(t, su.store)
	_, err = su.puller.Pull(t.Context(), su.ref, nil)
	if !strings.HasPrefix(fmt.Sprint(err), "SignatureValidationFailed: ") || !strings.Contains(err.Error(), md.String()) {
		t.Fatalf("pull of the moved tag: %v; want the new digest %s refused", err, md)
	}
	if after := stateOf(t, su.store); !after.equal(before) {
		t.Fatalf("refused pull changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
	if got, err := su.store.Get(su.ref); err != nil || got.ID != old.ID || got.Digest != su.digest {
		t.Fatalf("tag now names %+v, %v; want the verified image %s still", got, err, old.ID)
	}
	if su.log.fetched(t, moved) {
		t.Fatal("a blob of the refused image was fetched")
	}
}

// An image the store already has (pulled before the policy) is not given
// a new reference when a pull of an unsigned tag naming it is refused: the
// shortcut that fetches no blob is behind the policy too.
func TestPullPolicyPresentImageRefused(t *testing.T) {
	su := newSignedSetup(t, true)
	if _, err := su.store.SetPolicy(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := su.puller.Pull(t.Context(), su.ref, nil); err != nil {
		t.Fatal(err)
	}
	su.reg.push(t, "team/app:v2", su.img)
	if _, err := su.store.SetPolicy(requireKey(t, su.reg.host, su.key)); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, su.store)
	_, err := su.puller.Pull(t.Context(), su.reg.host+"/team/app:v2", nil)
	if !strings.HasPrefix(fmt.Sprint(err), "SignatureValidationFailed: ") {
		t.Fatalf("pull: %v; want it refused", err)
	}
	if after := stateOf(t, su.store); !after.equal(before) {
		t.Fatalf("refused pull changed the store:\nbefore %+v\nafter  %+v", before, after)
	}

	// Signed now, the same pull adds the reference; the image is verified
	// once each of its names is, as SetPolicy would judge it: v1 too.
	signCosign(t, su.reg, "team/app:v2", su.key, su.digest, su.digest)
	got, err := su.puller.Pull(t.Context(), su.reg.host+"/team/app:v2", nil)
	if err != nil || !slices.Contains(got.Refs, su.reg.host+"/team/app:v2") || got.Verification == nil || got.Verification.Decision != policy.Rejected ||
		!strings.Contains(got.Verification.Reason, su.reg.host+"/team/app:v1") {
		t.Fatalf("pull of the signed tag: %+v, %v; want it added, the image still refused under v1", got, err)
	}
	signCosign(t, su.reg, "team/app:v1", su.key, su.digest, su.digest)
	got, err = su.puller.Pull(t.Context(), su.ref, nil)
	if err != nil || got.Verification == nil || got.Verification.Decision != policy.Verified {
		t.Fatalf("pull of v1 signed too: %+v, %v", got, err)
	}
}

// A multi-platform image is verified by its index's digest, the one the
// tag resolves to and cosign signs, and recorded under it.
func TestPullPolicyIndexDigest(t *testing.T) {
	su := newSignedSetup(t, true)
	arm, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(emptyIndex(),
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: su.img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	id, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	su.reg.pushIndex(t, "team/multi:1", idx)
	signCosign(t, su.reg, "team/multi:1", su.key, id.String(), id.String())
	p := NewPuller(su.store, PullConfig{HostsDir: su.puller.cfg.HostsDir, Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}, discardLogger())
	got, err := p.Pull(t.Context(), su.reg.host+"/team/multi:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != id.String() || !slices.Equal(got.RepoDigests, []string{su.reg.host + "/team/multi@" + id.String()}) {
		t.Fatalf("Digest %s, RepoDigests %v; want the index's %s", got.Digest, got.RepoDigests, id)
	}
}

// Without a policy that reads signatures, none is asked for.
func TestPullPolicyNoSignatureRequests(t *testing.T) {
	su := newSignedSetup(t, true)
	doc := `{"default": [{"type": "insecureAcceptAnything"}]}`
	p, err := policy.Parse([]byte(doc), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var asked sync.Map
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		asked.Store(req.URL.Path, true)
		next.ServeHTTP(w, req)
	}
	su.reg.wrap.Store(&f)
	for _, pol := range []*policy.Policy{nil, p} {
		if _, err := su.store.SetPolicy(pol); err != nil {
			t.Fatal(err)
		}
		got, err := su.puller.Pull(t.Context(), su.ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Verification == nil || got.Verification.Decision != policy.Accepted {
			t.Fatalf("Verification = %+v, want accepted", got.Verification)
		}
	}
	asked.Range(func(k, _ any) bool {
		if p := k.(string); strings.Contains(p, ".sig") || strings.Contains(p, "/referrers/") || strings.Contains(p, "sha256-") {
			t.Errorf("asked for %s", p)
		}
		return true
	})
}

// pushIndex writes idx to the registry as ref.
func (r *testRegistry) pushIndex(t *testing.T, ref string, idx v1.ImageIndex) {
	t.Helper()
	r.putManifest(t, ref, "", nil, idx)
}

// putManifest PUTs body (of media type mt) at ref (repo:tag or repo@digest),
// or idx with its children if idx is set, straight into the registry.
func (r *testRegistry) putManifest(t *testing.T, ref, mt string, body []byte, idx v1.ImageIndex) {
	t.Helper()
	if idx != nil {
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		repo, _, _ := strings.Cut(ref, ":")
		for _, d := range im.Manifests {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			r.push(t, repo+"@"+d.Digest.String(), img)
		}
		if body, err = idx.RawManifest(); err != nil {
			t.Fatal(err)
		}
		m, err := idx.MediaType()
		if err != nil {
			t.Fatal(err)
		}
		mt = string(m)
	}
	repo, id, ok := strings.Cut(ref, "@")
	if !ok {
		repo, id, _ = strings.Cut(ref, ":")
	}
	req, err := http.NewRequest(http.MethodPut, "/v2/"+repo+"/manifests/"+id, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mt)
	w := &recorder{header: http.Header{}}
	r.reg.ServeHTTP(w, req)
	if w.code != http.StatusCreated {
		t.Fatalf("put manifest %s: %d %s", ref, w.code, w.body.String())
	}
}

// recorder is the least of an http.ResponseWriter.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}
func (w *recorder) WriteHeader(code int) { w.code = code }

// A registry that answers junk where signatures are looked for, or more
// of them than are read, has them skipped with a bounded reason: the pull
// is refused (nothing verifies), says why, and never crashes or hangs.
func TestPullPolicyHostileSignatures(t *testing.T) {
	tag := func(t *testing.T, su *signedSetup) string {
		tag, err := policy.SignatureTag(su.digest)
		if err != nil {
			t.Fatal(err)
		}
		return tag
	}
	cases := []struct {
		name   string
		setup  func(t *testing.T, su *signedSetup)
		detail string
	}{
		{"garbage at the signature tag", func(t *testing.T, su *signedSetup) {
			su.reg.putManifest(t, "team/app:"+tag(t, su), "application/vnd.oci.image.manifest.v1+json", []byte(`{"schemaVersion": 2, "layers": "\u001b[31mno"}`), nil)
		}, "tag sha256-"},
		{"an index at the signature tag", func(t *testing.T, su *signedSetup) {
			su.reg.pushIndex(t, "team/app:"+tag(t, su), mutate.AppendManifests(emptyIndex(), mutate.IndexAddendum{Add: su.img}))
		}, "not an image manifest"},
		{"a signature image of another kind", func(t *testing.T, su *signedSetup) {
			su.reg.push(t, "team/app:"+tag(t, su), su.img)
		}, ""},
		{"the referrers API failing", func(t *testing.T, su *signedSetup) {
			f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
				if strings.Contains(req.URL.Path, "/referrers/") {
					w.WriteHeader(http.StatusInternalServerError)
					fmt.Fprint(w, `{"errors":[{"code":"UNKNOWN","message":"`+strings.Repeat("x\\n", 4000)+`"}]}`)
					return
				}
				next.ServeHTTP(w, req)
			}
			su.reg.wrap.Store(&f)
		}, "referrers: "},
		{"more bundles than are read", func(t *testing.T, su *signedSetup) {
			other := newTestKey(t, "other")
			for range policy.MaxSignatures + 1 {
				signBundle(t, su.reg, "team/app", other, su.digest, descriptorOf(t, su.img))
			}
		}, fmt.Sprintf("more than %d", policy.MaxSignatures)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			su := newSignedSetup(t, true)
			c.setup(t, su)
			before := stateOf(t, su.store)
			_, err := su.puller.Pull(t.Context(), su.ref, nil)
			if !strings.HasPrefix(fmt.Sprint(err), "SignatureValidationFailed: ") || !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("pull: %v; want a refusal naming %q", err, c.detail)
			}
			if strings.ContainsAny(err.Error(), "\n\x1b") || len(err.Error()) > maxErrorText+len("... (cut)") {
				t.Fatalf("refusal not bounded and printable: %q", err)
			}
			if after := stateOf(t, su.store); !after.equal(before) {
				t.Fatalf("refused pull changed the store:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// A registry that stalls the signatures holds the pull no longer than its
// progress window: the pull ends, refused for want of signatures.
func TestPullPolicyStalledSignatures(t *testing.T) {
	su := newSignedSetup(t, true)
	signCosign(t, su.reg, "team/app:v1", su.key, su.digest, su.digest)
	tag, err := policy.SignatureTag(su.digest)
	if err != nil {
		t.Fatal(err)
	}
	trickle(su.reg, "manifests/"+tag, bytes.Repeat([]byte("{"), 4096), 20*time.Millisecond, nil)
	su.puller.cfg.ProgressTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err = su.puller.Pull(t.Context(), su.ref, nil)
	if !strings.HasPrefix(fmt.Sprint(err), "SignatureValidationFailed: ") || !strings.Contains(err.Error(), "tag "+tag) {
		t.Fatalf("pull: %v; want a refusal naming the stalled tag", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("pull took %v", d)
	}
}

// Signatures are read from the host that served the manifest, through its
// hosts.toml path: a mirror of Docker Hub that carries them verifies; a
// mirror before it with the image and no signature is refused, and the
// pull asks no other host for something else to run.
func TestPullPolicyFromMirror(t *testing.T) {
	key := newTestKey(t, "cosign")
	img := testImage(t)
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	signed := newTestRegistry(t, false)
	signed.reg = registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true))
	signed.prefix = "/mirror/dockerhub"
	signed.push(t, "library/app:v1", img)
	sig, err := key.signer.Bundle(d.String())
	if err != nil {
		t.Fatal(err)
	}
	art, err := policy.BundleArtifact(sig.Payload, descriptorOf(t, img))
	if err != nil {
		t.Fatal(err)
	}
	ad, err := art.Digest()
	if err != nil {
		t.Fatal(err)
	}
	signed.push(t, "library/app@"+ad.String(), art)
	stale := newTestRegistry(t, false)
	stale.push(t, "library/app:v1", img)

	hosts := t.TempDir()
	mirror := fmt.Sprintf(`
[host."http://%s/mirror/dockerhub"]
  capabilities = ["pull", "resolve"]
  override_path = true
`, signed.host)
	writeHosts(t, hosts, "docker.io", `server = "https://127.0.0.1:1"`+mirror)
	s := openStore(t)
	if _, err := s.SetPolicy(requireKey(t, "docker.io", key)); err != nil {
		t.Fatal(err)
	}
	p := NewPuller(s, PullConfig{HostsDir: hosts}, discardLogger())
	got, err := p.Pull(t.Context(), "app:v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != d.String() || got.Verification == nil || got.Verification.Decision != policy.Verified {
		t.Fatalf("pulled Digest %s, Verification %+v; want %s verified", got.Digest, got.Verification, d)
	}

	if err := s.Remove(got.ID); err != nil {
		t.Fatal(err)
	}
	writeHosts(t, hosts, "docker.io", fmt.Sprintf(`server = "https://127.0.0.1:1"
[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, stale.host)+mirror)
	signedBlobs := signed.blobs.Load()
	before := stateOf(t, s)
	_, err = p.Pull(t.Context(), "app:v1", nil)
	if !strings.HasPrefix(fmt.Sprint(err), "SignatureValidationFailed: ") || !strings.Contains(err.Error(), "docker.io/library/app@"+d.String()) {
		t.Fatalf("pull through the stale mirror: %v; want it refused", err)
	}
	if n := signed.blobs.Load(); n != signedBlobs {
		t.Fatalf("the mirror after the refusing one was asked for %d blobs", n-signedBlobs)
	}
	if after := stateOf(t, s); !after.equal(before) {
		t.Fatalf("refused pull changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestPullPolicyLaxNameDoesNotClearRefusal: the policy judges a registry
// image by the name it is pulled by, and the store keeps one verdict per
// image. An image the policy refuses under its name (unsigned, or signed by
// a key revoked since) must stay refused under that name when whoever
// answers for a name the policy accepts anything of serves the same image:
// otherwise that pull's verdict starts it under the strict name too.
func TestPullPolicyLaxNameDoesNotClearRefusal(t *testing.T) {
	su := newSignedSetup(t, true)
	// In the store from before the policy, unsigned.
	if _, err := su.store.SetPolicy(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := su.puller.Pull(t.Context(), su.ref, nil); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(fmt.Sprintf(`{"default": [{"type": "reject"}], "transports": {"docker": {
		%q: [{"type": "sigstoreSigned", "keyPath": %q}],
		%q: [{"type": "insecureAcceptAnything"}]}}}`, su.reg.host+"/team", su.key.pub, su.reg.host+"/lax")), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	refused, err := su.store.SetPolicy(p)
	if err != nil || len(refused) != 1 {
		t.Fatalf("SetPolicy refused %d images (%v), want the unsigned one", len(refused), err)
	}
	// The same image, under a name whose scope accepts anything.
	su.reg.push(t, "lax/copy:v1", su.img)
	if _, err := su.puller.Pull(t.Context(), su.reg.host+"/lax/copy:v1", nil); err != nil {
		t.Fatal(err)
	}
	got, err := su.store.Get(su.ref)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Verification; v == nil || v.Decision != policy.Rejected {
		t.Errorf("%s: verification %+v after a pull of the same image by another name; want it still rejected", su.ref, v)
	}
	if _, _, err := su.store.Prepare("c1", su.ref); !errors.Is(err, policy.ErrSignatureValidationFailed) {
		su.store.Release("c1")
		t.Errorf("Prepare(%s): %v; want it refused", su.ref, err)
	}
}
