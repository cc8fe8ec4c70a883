package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// RollbackAfter is how long the bundle has to be Ready before the one
	// it replaces comes back (0: never), recorded for the bundle source.
	RollbackAfter time.Duration
	// MaxBytes bounds the bundle: its download and its layout, decompressed
	// (0: DefaultMaxBytes).
	MaxBytes int64
	// Check, when set, is given the verified metadata and manifest files
	// (by name) before anything is imported: the daemon parses them as the
	// file source will, so a bundle whose manifests cannot run is refused
	// whole.
	Check func(md Metadata, files map[string][]byte) error
	// Client fetches an http(s) src (nil: one that gives up after an
	// hour). Unless it has a redirect policy of its own, no redirect from
	// https to http is followed.
	Client *http.Client
	// Remote are the options of a registry src's pulls (auth, transport).
	Remote []remote.Option
	// Now stamps Applied and Trial (nil: time.Now).
	Now func() time.Time
}

// Apply verifies the bundle at src (a file, an http(s) URL or an OCI
// reference) under pol, which must be the store's policy, imports its images into store and pins them, and
// makes it the node's Current bundle (the one it replaces Previous, on
// Trial): the record under rootDir/bundles and state.json. Everything is
// verified before anything is imported: the bundle's signature (policy
// transport oci-archive with the file's absolute path, or "" for a URL;
// docker with the reference for one), every blob's digest, the metadata's
// limits, every manifest file's name and digest, opts.Check, and each image
// under pol through the store's own import of the bundle's images, which
// takes all of them or none. A bundle refused at any step leaves the store
// and state.json as they were.
func Apply(ctx context.Context, store *image.Store, pol *policy.Policy, src string, rootDir string, opts ApplyOptions) (Record, error) {
	if store.Policy() != pol {
		// The store's import judges the images: one policy for all of it.
		return Record{}, errors.New("bundle: the image store enforces another policy than the bundle's (Store.SetPolicy)")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := atomicfile.MkdirAll(Dir(rootDir), 0o700); err != nil {
		return Record{}, fmt.Errorf("bundles: %w", err)
	}
	staging, err := os.MkdirTemp(Dir(rootDir), ".staging-")
	if err != nil {
		return Record{}, fmt.Errorf("bundles: %w", err)
	}
	defer os.RemoveAll(staging)
	dir := filepath.Join(staging, "layout")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return Record{}, err
	}
	// The bundle is staged beside the store (the root dir's filesystem, as
	// a rule) before its signature can be checked: an unsigned one must not
	// take that filesystem below the reserve an image import leaves.
	room, err := store.Headroom()
	if err != nil {
		return Record{}, fmt.Errorf("bundle %s: %w", trunc(src), err)
	}
	opts.MaxBytes = min(opts.MaxBytes, room)
	subject, err := stage(ctx, src, dir, opts)
	if err != nil {
		return Record{}, fmt.Errorf("bundle %s: %w", trunc(src), err)
	}
	b, err := verify(ctx, dir, pol, subject)
	if err != nil {
		return Record{}, fmt.Errorf("bundle %s: %w", trunc(src), err)
	}
	if subject.Transport == policy.TransportDocker {
		if err := b.pullImages(ctx, src, opts); err != nil {
			return Record{}, fmt.Errorf("bundle %s: %w", trunc(src), err)
		}
	}
	if opts.Check != nil {
		if err := opts.Check(b.md, b.files); err != nil {
			return Record{}, fmt.Errorf("bundle %s: %w", trunc(src), err)
		}
	}
	// The images are judged as the bundle is: from its file, or from a
	// stream (a URL's body, a registry's bundle), with no path.
	scope := ""
	if subject.Transport == policy.TransportOCIArchive {
		scope = subject.Scope
	}
	rec, err := b.install(ctx, store, rootDir, filepath.Join(staging, "images"), scope, opts)
	if err != nil {
		return Record{}, fmt.Errorf("bundle %s (%s): %w", b.md.Name, b.digest, err)
	}
	return rec, nil
}

// stage puts the bundle at src into the empty layout dir, and says what
// its signature is checked as.
func stage(ctx context.Context, src, dir string, opts ApplyOptions) (policy.Image, error) {
	switch {
	case strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://"):
		return policy.Image{Transport: policy.TransportOCIArchive}, download(ctx, src, dir, opts)
	case fileExists(src) || !registryRef(src):
		// A file is judged by its real path, as the store judges an
		// archive (containers/image's oci-archive scope).
		abs, err := filepath.Abs(src)
		if err != nil {
			return policy.Image{}, err
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		f, err := os.Open(abs)
		if err != nil {
			return policy.Image{}, err
		}
		defer f.Close()
		return policy.Image{Transport: policy.TransportOCIArchive, Scope: abs}, extract(ctx, f, dir, opts.MaxBytes, false)
	default:
		return pullBundle(ctx, src, dir, opts)
	}
}

// registryRef says whether src names a registry explicitly (host.domain/…,
// host:port/…, localhost/…): a bundle is never looked for on Docker Hub by
// a file name that is missing.
func registryRef(src string) bool {
	host, _, ok := strings.Cut(src, "/")
	return ok && (strings.ContainsAny(host, ".:") || host == "localhost")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// noDowngrade follows at most 10 redirects, none from https to http.
func noDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirect from https to %s refused", req.URL.Scheme)
	}
	return nil
}

// download reads the bundle at url (bounded by opts.MaxBytes) into dir.
func download(ctx context.Context, url, dir string, opts ApplyOptions) error {
	client := &http.Client{Timeout: time.Hour}
	if opts.Client != nil {
		client = new(http.Client)
		*client = *opts.Client
	}
	if client.CheckRedirect == nil {
		client.CheckRedirect = noDowngrade
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET: %s", resp.Status)
	}
	if resp.ContentLength > opts.MaxBytes {
		return fmt.Errorf("GET: %d bytes: more than %d", resp.ContentLength, opts.MaxBytes)
	}
	// The layout written is bounded by MaxBytes too; so is what is read,
	// compressed, so that a body that never ends does not read forever.
	lr := &io.LimitedReader{R: resp.Body, N: opts.MaxBytes + 1}
	if err := extract(ctx, lr, dir, opts.MaxBytes, false); err != nil {
		return err
	}
	if lr.N == 0 {
		return fmt.Errorf("GET: more than %d bytes", opts.MaxBytes)
	}
	return nil
}

// verified is a bundle whose signature, blobs and metadata are verified.
type verified struct {
	dir     string
	digest  string // of its manifest
	signer  string
	md      Metadata
	files   map[string][]byte
	entries []v1.Descriptor // index.json's
	// subjects are the manifests (by digest) of index.json with a subject,
	// by the subject's digest: signatures attached as referrers.
	subjects map[string][]v1.Descriptor
}

// verify checks the layout in dir: the bundle's manifest, its signature
// under pol (as subject, which has transport, scope and reference), its
// metadata and its manifest files.
func verify(ctx context.Context, dir string, pol *policy.Policy, subject policy.Image) (*verified, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, err
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if len(idx.Manifests) > MaxBlobs {
		return nil, fmt.Errorf("index.json: more than %d entries", MaxBlobs)
	}
	b := &verified{dir: dir, entries: idx.Manifests}
	if err := b.findSubjects(); err != nil {
		return nil, err
	}
	var bundleManifest *v1.Manifest
	for i, desc := range idx.Manifests {
		if !desc.MediaType.IsImage() {
			continue
		}
		m, err := readManifest(dir, desc.Digest.String())
		if err != nil {
			return nil, fmt.Errorf("index.json manifests[%d]: %w", i, err)
		}
		if desc.ArtifactType != ArtifactType && m.ArtifactType != ArtifactType {
			continue
		}
		if bundleManifest != nil {
			return nil, fmt.Errorf("index.json: two bundle manifests (%s, %s)", b.digest, desc.Digest)
		}
		bundleManifest, b.digest = m, desc.Digest.String()
	}
	if bundleManifest == nil {
		return nil, fmt.Errorf("not a bundle: no manifest of artifact type %s in index.json", ArtifactType)
	}

	// The signature first: nothing else of the bundle is read, beyond
	// what finding it took, before it is known whose it is.
	subject.Digest = b.digest
	for _, desc := range b.subjects[b.digest] {
		m, _ := readManifest(dir, desc.Digest.String())
		if m.ArtifactType != policy.ArtifactTypeBundle && m.Config.MediaType != policy.ArtifactTypeBundle {
			continue
		}
		sig, err := readBundleArtifact(dir, desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("signature %s: %w", desc.Digest, err)
		}
		subject.Signatures = append(subject.Signatures, sig)
	}
	v := pol.Evaluate(ctx, subject)
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", b.digest, err)
	}
	b.signer = signer(v)

	if bundleManifest.Config.MediaType != MediaTypeMetadata {
		return nil, fmt.Errorf("bundle manifest: config media type %q, want %s", trunc(string(bundleManifest.Config.MediaType)), MediaTypeMetadata)
	}
	cfg, err := readBlob(dir, bundleManifest.Config.Digest.String(), MaxJSONBytes)
	if err != nil {
		return nil, fmt.Errorf("bundle metadata: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b.md); err != nil {
		return nil, fmt.Errorf("bundle metadata: %w", err)
	}
	if err := b.md.check(); err != nil {
		return nil, fmt.Errorf("bundle metadata: %w", err)
	}
	if len(bundleManifest.Layers) != 1 || bundleManifest.Layers[0].MediaType != MediaTypeManifests {
		return nil, fmt.Errorf("bundle manifest: want one layer of media type %s", MediaTypeManifests)
	}
	if b.files, err = readManifests(dir, bundleManifest.Layers[0].Digest.String(), b.md); err != nil {
		return nil, fmt.Errorf("bundle manifests layer: %w", err)
	}
	return b, nil
}

// findSubjects finds the manifests of b.entries with a subject: the
// signatures attached as referrers.
func (b *verified) findSubjects() error {
	b.subjects = map[string][]v1.Descriptor{}
	for i, desc := range b.entries {
		if !desc.MediaType.IsImage() {
			continue
		}
		m, err := readManifest(b.dir, desc.Digest.String())
		if err != nil {
			return fmt.Errorf("index.json manifests[%d]: %w", i, err)
		}
		if m.Subject == nil {
			continue
		}
		s := m.Subject.Digest.String()
		if len(b.subjects[s]) >= policy.MaxSignatures {
			return fmt.Errorf("more than %d manifests refer to %s", policy.MaxSignatures, s)
		}
		b.subjects[s] = append(b.subjects[s], desc)
	}
	return nil
}

// signer is how a record names the verdict on a bundle's signature.
func signer(v policy.Verdict) string {
	if v.Decision == policy.Verified {
		return "verified by " + v.By
	}
	return string(v.Decision)
}

func readManifest(dir, digest string) (*v1.Manifest, error) {
	raw, err := readBlob(dir, digest, MaxJSONBytes)
	if err != nil {
		return nil, err
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", digest, err)
	}
	return &m, nil
}

// readBundleArtifact reads the sigstore bundle of the referrer manifest h.
func readBundleArtifact(dir string, h v1.Hash) (policy.Signature, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return policy.Signature{}, err
	}
	img, err := lp.Image(h)
	if err != nil {
		return policy.Signature{}, err
	}
	return policy.ReadBundleArtifact(img, "referrer "+h.String())
}

// readManifests reads the tar layer digest: exactly the files md lists,
// each with its digest and size.
func readManifests(dir, digest string, md Metadata) (map[string][]byte, error) {
	want := map[string]File{}
	var total int64
	for _, f := range md.Manifests {
		want[f.Name] = f
		total += f.Size
	}
	// The tar's headers and padding on top of the files: 1.5 KiB each at most.
	raw, err := readBlob(dir, digest, total+int64(len(md.Manifests)+2)*1536)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := CheckFileName(hdr.Name); err != nil {
			return nil, err
		}
		f, ok := want[hdr.Name]
		switch {
		case hdr.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("%s: not a regular file", hdr.Name)
		case !ok:
			return nil, fmt.Errorf("%s: not in the bundle's metadata", hdr.Name)
		case files[hdr.Name] != nil:
			return nil, fmt.Errorf("%s: twice", hdr.Name)
		case hdr.Size != f.Size:
			return nil, fmt.Errorf("%s: %d bytes, the metadata says %d", hdr.Name, hdr.Size, f.Size)
		}
		data, err := io.ReadAll(io.LimitReader(tr, f.Size))
		if err != nil {
			return nil, err
		}
		if sum := sha256.Sum256(data); "sha256:"+hex.EncodeToString(sum[:]) != f.Digest {
			return nil, fmt.Errorf("%s: content has digest sha256:%s, the metadata says %s: tampered", hdr.Name, hex.EncodeToString(sum[:]), f.Digest)
		}
		files[hdr.Name] = data
	}
	for name := range want {
		if files[name] == nil {
			return nil, fmt.Errorf("%s: in the metadata, not in the layer", name)
		}
	}
	return files, nil
}

// imagesLayout writes the OCI layout dir that the store imports: the
// bundle's images, named as the (signed) metadata names them, not as its
// index.json (which no signature covers) does, and their signatures, over
// the bundle's blobs.
func (b *verified) imagesLayout(dir string) (map[string]string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Symlink(filepath.Join(b.dir, "blobs"), filepath.Join(dir, "blobs")); err != nil {
		return nil, err
	}
	var idx v1.IndexManifest
	idx.SchemaVersion = 2
	idx.MediaType = types.OCIImageIndex
	norms := map[string]string{}
	sigsOf := map[string]bool{}
	for _, img := range b.md.Images {
		norm, err := image.Normalize(img.Ref)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Ref, err)
		}
		norms[img.Ref] = norm
		i := slices.IndexFunc(b.entries, func(d v1.Descriptor) bool { return d.Digest.String() == img.Digest })
		if i < 0 {
			return nil, fmt.Errorf("image %s: %s is not in the bundle", img.Ref, img.Digest)
		}
		desc := b.entries[i]
		if !desc.MediaType.IsImage() && !desc.MediaType.IsIndex() {
			return nil, fmt.Errorf("image %s: %s is a %s, not an image", img.Ref, img.Digest, trunc(string(desc.MediaType)))
		}
		fi, err := os.Stat(filepath.Join(b.dir, "blobs", "sha256", Hex(img.Digest)))
		if err != nil {
			return nil, fmt.Errorf("image %s: %s is not in the bundle", img.Ref, img.Digest)
		}
		idx.Manifests = append(idx.Manifests, v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: fi.Size(),
			Annotations: map[string]string{"io.containerd.image.name": norm, imagespec.AnnotationRefName: norm}})
		if sigsOf[img.Digest] {
			continue // another name of the same image: its signatures are in
		}
		sigsOf[img.Digest] = true
		tag, err := policy.SignatureTag(img.Digest)
		if err != nil {
			return nil, err
		}
		for _, d := range b.entries {
			if d.Annotations[imagespec.AnnotationRefName] == tag && d.MediaType.IsImage() {
				idx.Manifests = append(idx.Manifests, d)
			}
		}
		idx.Manifests = append(idx.Manifests, b.subjects[img.Digest]...)
	}
	raw, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), raw, 0o600); err != nil {
		return nil, err
	}
	return norms, os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o600)
}

// install imports and pins b's images, records b and makes it Current.
func (b *verified) install(ctx context.Context, store *image.Store, rootDir, imagesDir, scope string, opts ApplyOptions) (Record, error) {
	rec := Record{Name: b.md.Name, Digest: b.digest, Created: b.md.Created, Applied: opts.Now().UTC(),
		Signer: b.signer, RollbackAfter: opts.RollbackAfter}
	for _, f := range b.md.Manifests {
		rec.Manifests = append(rec.Manifests, f.Name)
	}
	if len(b.md.Images) > 0 {
		norms, err := b.imagesLayout(imagesDir)
		if err != nil {
			return Record{}, err
		}
		imgs, err := store.ImportAs(ctx, imagesDir, scope)
		if err != nil {
			return Record{}, err
		}
		for _, want := range b.md.Images {
			i := slices.IndexFunc(imgs, func(img image.Image) bool { return slices.Contains(img.Refs, norms[want.Ref]) })
			if i < 0 {
				return Record{}, fmt.Errorf("image %s: not imported", want.Ref)
			}
			rec.Images = append(rec.Images, Image{Ref: want.Ref, Digest: want.Digest, ID: imgs[i].ID})
		}
	}

	unlock, err := LockState(rootDir)
	if err != nil {
		return Record{}, err
	}
	defer unlock()
	st, err := ReadState(rootDir)
	if err != nil {
		return Record{}, err
	}
	for _, img := range rec.Images {
		if _, err := store.Pin(img.ID, true); err != nil {
			return Record{}, err
		}
	}
	h := Hex(b.digest)
	if h == st.Current {
		// Applied again: the images are back if they were removed; the
		// record and its trial stand.
		return ReadRecord(rootDir, h)
	}
	if err := writeRecord(rootDir, rec, b.files); err != nil {
		return Record{}, err
	}
	next := State{Current: h, Previous: st.Current, Trial: rec.Applied}
	if st.Previous != "" && onTrial(rootDir, st) {
		// The bundle replaced was never Ready: what comes back if this one
		// fails is the last bundle kept, not it (which would come back
		// with no trial left), nor the bundle being applied again.
		next.Previous = st.Previous
		if next.Previous == h {
			next.Previous = ""
		}
	}
	if err := WriteState(rootDir, next); err != nil {
		return Record{}, err
	}
	for _, old := range []string{st.Current, st.Previous} {
		if old != "" && old != next.Current && old != next.Previous {
			// No rollback target any more.
			if err := Release(store, rootDir, old, next); err != nil {
				return rec, fmt.Errorf("applied, but releasing bundle %s: %w", old, err)
			}
		}
	}
	return rec, nil
}

// onTrial says whether st's Current bundle is still on trial: applied with
// a rollback-after and not yet kept. One applied without is kept at once,
// whenever the daemon gets to clear its trial.
func onTrial(rootDir string, st State) bool {
	if st.Trial.IsZero() {
		return false
	}
	rec, err := ReadRecord(rootDir, st.Current)
	return err == nil && rec.RollbackAfter > 0
}

// writeRecord writes bundles/<hex>/ for rec: its manifest files and
// bundle.json, made in a dir of its own and renamed into place, so that a
// reader never sees half of one.
func writeRecord(rootDir string, rec Record, files map[string][]byte) error {
	final := RecordDir(rootDir, Hex(rec.Digest))
	tmp, err := os.MkdirTemp(Dir(rootDir), ".record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := atomicfile.MkdirAll(filepath.Join(tmp, "manifests"), 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := atomicfile.Write(filepath.Join(tmp, "manifests", name), data); err != nil {
			return err
		}
	}
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(tmp, "bundle.json"), append(raw, '\n')); err != nil {
		return err
	}
	// A record left from an earlier apply of the same bundle (it was
	// Previous, or applied and dropped) is replaced.
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return atomicfile.MkdirAll(Dir(rootDir), 0o700)
}

// Release unpins the images of the bundle hex that neither bundle of st
// still has, and removes its record; under LockState. The bundle source
// calls it for the Previous bundle once Current is Ready, and for a bundle
// rolled back.
func Release(store *image.Store, rootDir, hex string, st State) error {
	if !validHex(hex) {
		return fmt.Errorf("bundles: %q is not a bundle's digest", hex)
	}
	rec, err := ReadRecord(rootDir, hex)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	keep := map[string]bool{}
	for _, other := range []string{st.Current, st.Previous} {
		if other == "" || other == hex {
			continue
		}
		r, err := ReadRecord(rootDir, other)
		if err != nil {
			return err
		}
		for _, img := range r.Images {
			keep[img.ID] = true
		}
	}
	for _, img := range rec.Images {
		if keep[img.ID] {
			continue
		}
		if _, err := store.Pin(img.ID, false); err != nil && !errors.Is(err, podspec.ErrImageNotPresent) {
			return err
		}
	}
	return os.RemoveAll(RecordDir(rootDir, hex))
}
