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
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// CreateOptions say what a bundle holds.
type CreateOptions struct {
	Name string
	// Files are the manifest files, by the name they get in the bundle.
	Files map[string][]byte
	// Images are the references the manifests name, each of which one of
	// Sources must supply.
	Images []string
	// Sources are OCI archives (tar, plain or gzip, or layout dirs) whose
	// named images supply the references, and registry references whose
	// images are pulled as they are, each supplying itself.
	Sources []string
	Signer  Signer
	// Gzip compresses the archive written.
	Gzip bool
	// Remote are the options of registry pulls and pushes (auth, transport).
	Remote []remote.Option
	Now    func() time.Time
}

// Created is what Create made.
type Created struct {
	Digest   string // of the bundle's manifest
	Metadata Metadata
	// Layout is the bundle's OCI layout dir, valid until Close.
	Layout string
	tmp    string
}

// Close removes what Create left on disk.
func (c *Created) Close() error { return os.RemoveAll(c.tmp) }

// ErrMissingImage says that no source supplied an image.
var ErrMissingImage = errors.New("no --image supplies it")

// Create makes the bundle: an OCI layout in a temp dir (under tmpDir) with
// every image of opts.Images copied as it is (manifest bytes, blobs) with
// the signatures that travel with it, the bundle's manifest, and its
// signature by opts.Signer as a sigstore bundle referrer. Write it with
// WriteTo or Push; Close it then.
func Create(ctx context.Context, tmpDir string, opts CreateOptions) (_ *Created, err error) {
	if err := CheckName(opts.Name); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	tmp, err := os.MkdirTemp(tmpDir, ".bundle-create-")
	if err != nil {
		return nil, err
	}
	c := &Created{tmp: tmp, Layout: filepath.Join(tmp, "layout")}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	out, err := layout.Write(c.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	srcs, err := openSources(ctx, tmp, opts)
	if err != nil {
		return nil, err
	}
	md := Metadata{Name: opts.Name, Created: opts.Now().UTC().Truncate(time.Second)}
	copied := map[string]bool{}
	for _, ref := range opts.Images {
		norm, err := image.Normalize(ref)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		i := slices.IndexFunc(srcs, func(s imageSource) bool { return s.supplies(norm) })
		if i < 0 {
			return nil, fmt.Errorf("image %s: %w", ref, ErrMissingImage)
		}
		d, err := srcs[i].copyTo(ctx, out, norm, copied)
		if err != nil {
			return nil, fmt.Errorf("image %s from %s: %w", ref, srcs[i].name(), err)
		}
		md.Images = append(md.Images, ImageRef{Ref: ref, Digest: d})
	}
	layer, err := manifestsTar(opts.Files, &md)
	if err != nil {
		return nil, err
	}
	if err := md.check(); err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType,
		Config:      blobDescriptor(MediaTypeMetadata, cfg),
		Layers:      []v1.Descriptor{blobDescriptor(MediaTypeManifests, layer)},
		Annotations: map[string]string{imagespec.AnnotationTitle: md.Name, imagespec.AnnotationCreated: md.Created.Format(time.RFC3339)}}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	desc := blobDescriptor(types.OCIManifestSchema1, raw)
	desc.ArtifactType = ArtifactType
	desc.Annotations = map[string]string{AnnotationName: md.Name}
	for _, b := range [][]byte{cfg, layer, raw} {
		if err := out.WriteBlob(blobDescriptor("", b).Digest, io.NopCloser(bytes.NewReader(b))); err != nil {
			return nil, err
		}
	}
	if err := out.AppendDescriptor(desc); err != nil {
		return nil, err
	}
	sig, err := opts.Signer.Bundle(desc.Digest.String())
	if err != nil {
		return nil, fmt.Errorf("sign the bundle: %w", err)
	}
	subject := desc
	subject.Annotations = nil
	ref, err := policy.BundleArtifact(sig.Payload, subject)
	if err != nil {
		return nil, fmt.Errorf("sign the bundle: %w", err)
	}
	if _, err := appendReferrer(out, ref); err != nil {
		return nil, err
	}
	c.Digest, c.Metadata = desc.Digest.String(), md
	return c, nil
}

// WriteTo writes the bundle as a tar (gzipped if gz) to w.
func (c *Created) WriteTo(w io.Writer, gz bool) error { return writeLayoutTar(c.Layout, w, gz) }

func blobDescriptor(mt types.MediaType, b []byte) v1.Descriptor {
	sum := sha256.Sum256(b)
	return v1.Descriptor{MediaType: mt, Size: int64(len(b)),
		Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}}
}

// manifestsTar is the layer of the manifest files, in name order, and their
// entries in md.
func manifestsTar(files map[string][]byte, md *Metadata) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := CheckFileName(n); err != nil {
			return nil, err
		}
		data := files[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(data)), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		md.Manifests = append(md.Manifests, File{Name: n, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))})
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageSource supplies images to a bundle: an OCI archive's, or a
// registry's.
type imageSource struct {
	src string
	// archive: the layout, its index and the entries by normalised ref.
	dir   string
	lp    layout.Path
	index *v1.IndexManifest
	refs  map[string]v1.Descriptor
	// registry: the reference, normalised.
	ref     name.Reference
	norm    string
	options []remote.Option
	// left, if set, is what the images pulled may still weigh, as their
	// manifests declare it (the registry's reads are held to those sizes).
	left *int64
}

func (s imageSource) name() string { return s.src }

func (s imageSource) supplies(norm string) bool {
	if s.ref != nil {
		return s.norm == norm
	}
	_, ok := s.refs[norm]
	return ok
}

func openSources(ctx context.Context, tmp string, opts CreateOptions) ([]imageSource, error) {
	var srcs []imageSource
	for i, src := range opts.Sources {
		fi, err := os.Stat(src)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err != nil {
			norm, nerr := image.Normalize(src)
			if nerr != nil {
				return nil, fmt.Errorf("--image %s: neither a file nor a reference: %w", src, nerr)
			}
			ref, nerr := name.ParseReference(norm)
			if nerr != nil {
				return nil, fmt.Errorf("--image %s: %w", src, nerr)
			}
			srcs = append(srcs, imageSource{src: src, ref: ref, norm: norm, options: append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)})
			continue
		}
		dir := src
		if !fi.IsDir() {
			dir = filepath.Join(tmp, fmt.Sprintf("src%d", i))
			if err := os.Mkdir(dir, 0o700); err != nil {
				return nil, err
			}
			f, err := os.Open(src)
			if err != nil {
				return nil, err
			}
			err = extract(ctx, f, dir, DefaultMaxBytes, true)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("--image %s: %w", src, err)
			}
		}
		s := imageSource{src: src, dir: dir, refs: map[string]v1.Descriptor{}}
		if s.lp, err = layout.FromPath(dir); err != nil {
			return nil, fmt.Errorf("--image %s: %w", src, err)
		}
		ii, err := s.lp.ImageIndex()
		if err != nil {
			return nil, fmt.Errorf("--image %s: %w", src, err)
		}
		if s.index, err = ii.IndexManifest(); err != nil {
			return nil, fmt.Errorf("--image %s: %w", src, err)
		}
		for _, d := range s.index.Manifests {
			if isSignatureEntry(dir, d) || (!d.MediaType.IsImage() && !d.MediaType.IsIndex()) {
				continue
			}
			if r := entryRef(d); r != "" {
				if norm, err := image.Normalize(r); err == nil {
					s.refs[norm] = d
				}
			}
		}
		srcs = append(srcs, s)
	}
	return srcs, nil
}

// copyTo copies the image norm names, and its signatures (once: copied),
// into out, as it is, named norm; it returns its digest.
func (s imageSource) copyTo(ctx context.Context, out layout.Path, norm string, copied map[string]bool) (string, error) {
	names := layout.WithAnnotations(map[string]string{"io.containerd.image.name": norm, imagespec.AnnotationRefName: norm})
	if s.ref != nil {
		return s.pull(out, names, copied)
	}
	desc := s.refs[norm]
	d := desc.Digest.String()
	var err error
	if desc.MediaType.IsIndex() {
		var ii v1.ImageIndex
		if ii, err = s.lp.ImageIndex(); err == nil {
			if ii, err = ii.ImageIndex(desc.Digest); err == nil {
				err = out.AppendIndex(ii, names)
			}
		}
	} else {
		var img v1.Image
		if img, err = s.lp.Image(desc.Digest); err == nil {
			err = out.AppendImage(img, names)
		}
	}
	if err != nil || copied[d] {
		return d, err
	}
	copied[d] = true
	tag, err := policy.SignatureTag(d)
	if err != nil {
		return "", err
	}
	n := 0
	for _, e := range s.index.Manifests {
		if !e.MediaType.IsImage() {
			continue
		}
		isTag := e.Annotations[imagespec.AnnotationRefName] == tag
		if !isTag {
			m, err := readManifest(s.dir, e.Digest.String())
			if err != nil || m.Subject == nil || m.Subject.Digest != desc.Digest {
				continue
			}
		}
		if n++; n > 2*policy.MaxSignatures {
			return "", fmt.Errorf("more than %d signature manifests", 2*policy.MaxSignatures)
		}
		img, err := s.lp.Image(e.Digest)
		if err != nil {
			return "", err
		}
		if isTag {
			err = out.AppendImage(img, layout.WithAnnotations(map[string]string{imagespec.AnnotationRefName: tag}))
		} else {
			_, err = appendReferrer(out, img)
		}
		if err != nil {
			return "", fmt.Errorf("signature %s: %w", e.Digest, err)
		}
	}
	return d, nil
}

// declaredSize is what the manifests of desc say its blobs weigh.
func declaredSize(desc *remote.Descriptor) (int64, error) {
	var imgs []v1.Image
	if desc.MediaType.IsIndex() {
		ii, err := desc.ImageIndex()
		if err != nil {
			return 0, err
		}
		im, err := ii.IndexManifest()
		if err != nil {
			return 0, err
		}
		if len(im.Manifests) > MaxBlobs {
			return 0, fmt.Errorf("index %s: more than %d manifests", desc.Digest, MaxBlobs)
		}
		for _, c := range im.Manifests {
			img, err := ii.Image(c.Digest)
			if err != nil {
				return 0, err
			}
			imgs = append(imgs, img)
		}
	} else {
		img, err := desc.Image()
		if err != nil {
			return 0, err
		}
		imgs = append(imgs, img)
	}
	n := desc.Size
	for _, img := range imgs {
		m, err := img.Manifest()
		if err != nil {
			return 0, err
		}
		if len(m.Layers) > MaxBlobs {
			return 0, fmt.Errorf("manifest: more than %d layers", MaxBlobs)
		}
		n += m.Config.Size
		for _, l := range m.Layers {
			if l.Size < 0 {
				return 0, errors.New("manifest: a negative size")
			}
			n += l.Size
		}
	}
	return n, nil
}

// pull copies the registry's image, its cosign signature image and its
// sigstore bundle referrers into out.
func (s imageSource) pull(out layout.Path, names layout.Option, copied map[string]bool) (string, error) {
	desc, err := remote.Get(s.ref, s.options...)
	if err != nil {
		return "", err
	}
	if s.left != nil {
		n, err := declaredSize(desc)
		if err != nil {
			return "", err
		}
		if *s.left -= n; *s.left < 0 {
			return "", errors.New("the bundle's images weigh more than the bundle may")
		}
	}
	if desc.MediaType.IsIndex() {
		ii, err := desc.ImageIndex()
		if err != nil {
			return "", err
		}
		err = out.AppendIndex(ii, names)
	} else {
		img, err := desc.Image()
		if err != nil {
			return "", err
		}
		err = out.AppendImage(img, names)
	}
	if err != nil {
		return "", err
	}
	d := desc.Digest.String()
	if copied[d] {
		return d, nil
	}
	copied[d] = true
	repo := s.ref.Context()
	tag, err := policy.SignatureTag(d)
	if err != nil {
		return "", err
	}
	sigImg, err := remote.Image(repo.Tag(tag), s.options...)
	var terr *transport.Error
	switch {
	case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
	case err != nil:
		return "", fmt.Errorf("signatures %s: %w", tag, err)
	default:
		if err := out.AppendImage(sigImg, layout.WithAnnotations(map[string]string{imagespec.AnnotationRefName: tag})); err != nil {
			return "", fmt.Errorf("signatures %s: %w", tag, err)
		}
	}
	if _, err := pullReferrers(out, repo.Digest(d), s.options); err != nil {
		return "", err
	}
	return d, nil
}
