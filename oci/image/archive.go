package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Annotations that name an image in an OCI index.
const (
	annotationRefName        = imagespec.AnnotationRefName // org.opencontainers.image.ref.name
	annotationContainerdName = "io.containerd.image.name"
)

var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// openArchive finds the images in path: an OCI layout directory, or a tar (plain,
// gzip or zstd, told apart by magic bytes) holding an OCI layout or a docker-archive.
// It may write a decompressed copy or an unpacked layout under staging, charged to sp.
func openArchive(p, staging string, sp *space, m *meter) ([]source, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return layoutImages(p)
	}
	tarPath, err := decompressed(p, staging, sp, m)
	if err != nil {
		return nil, err
	}
	entries, err := readTarIndex(tarPath)
	if err != nil {
		return nil, err
	}
	switch {
	case entries.has("oci-layout") || entries.has("index.json"):
		dir := filepath.Join(staging, "layout")
		if err := extractLayout(tarPath, dir, sp); err != nil {
			return nil, err
		}
		return layoutImages(dir)
	case entries.has("manifest.json"):
		return dockerImages(entries)
	default:
		return nil, errors.New("not an OCI archive or docker-archive: no oci-layout, index.json or manifest.json in the tar")
	}
}

// decompressed returns p itself if it is not compressed, or a decompressed copy of it
// in staging.
func decompressed(p, staging string, sp *space, m *meter) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := &archiveReader{r: f}
	r, kind, err := decompress(in)
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	defer r.Close()
	if kind == "" {
		return p, nil
	}
	if fi, err := f.Stat(); err == nil && m != nil {
		m.phase("decompressing", fi.Size())
		in.meter(m)
	}
	out := filepath.Join(staging, "archive.tar")
	w, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer w.Close()
	if _, err := io.Copy(spaceWriter{w, sp}, r); err != nil {
		return "", fmt.Errorf("decompress %s: %w", kind, truncated(err))
	}
	return out, w.Close()
}

// archiveReader counts what is read of an archive, and tells m once set. A
// zstd decoder reads it from a goroutine of its own, from the moment it is
// made: mu guards the count and the meter.
type archiveReader struct {
	r  io.Reader
	mu sync.Mutex
	n  int64
	m  *meter
}

func (a *archiveReader) Read(b []byte) (int, error) {
	n, err := a.r.Read(b)
	a.mu.Lock()
	a.n += int64(n)
	m := a.m
	a.mu.Unlock()
	// Once m is set, what was counted before it is told already.
	m.add(int64(n))
	return n, err
}

// meter tells m what was read so far (telling the compression), and every
// read after.
func (a *archiveReader) meter(m *meter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m.add(a.n)
	a.m = m
}

// extractLayout unpacks the OCI layout in the tar at p into dir: directories and
// regular files only, and nothing outside dir.
func extractLayout(p, dir string, sp *space) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		rel := path.Clean(hdr.Name)
		if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) {
			return fmt.Errorf("read tar: %w", &entryError{name: hdr.Name, err: errEscapesLayout})
		}
		target := filepath.Join(dir, rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := sp.take(blockSize); err != nil {
				return fmt.Errorf("extract: %w", &entryError{name: hdr.Name, err: err})
			}
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := sp.takeFile(hdr.Size); err != nil {
				return fmt.Errorf("extract: %w", &entryError{name: hdr.Name, err: err})
			}
			if err := writeRegular(target, tr); err != nil {
				return fmt.Errorf("extract: %w", &entryError{name: hdr.Name, err: err})
			}
		}
	}
}

func writeRegular(target string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return err
	}
	w, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// layoutImages lists the images of the OCI layout in dir, with their references,
// each with the manifest digest it is named by in index.json and the signatures
// the layout carries for that digest (layoutSignatures). An image index inside
// the layout (a multi-platform image) gives the image for this machine's
// platform; its signatures are those of the index, as cosign signs it.
// Signatures and other referrers (a manifest with a subject) are not images:
// they are never imported as such.
func layoutImages(dir string) ([]source, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout: %w", err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout index: %w", err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout index: %w", err)
	}
	sigs := newLayoutSignatures(ii)
	var srcs []source
	// cosign save's image, whose signatures its sigs entry holds.
	var cosignImage, cosignSigs *v1.Descriptor
	for i, desc := range im.Manifests {
		switch kind := desc.Annotations[annotationCosignKind]; {
		case kind == cosignKindSigs:
			cosignSigs = &im.Manifests[i]
			continue
		case kind == cosignKindAtts:
			continue // attestations: not what a policy here checks
		case kind == cosignKindImage || kind == cosignKindImageIndex:
			cosignImage = &im.Manifests[i]
		}
		if subject, ok := signatureTagSubject(desc); ok {
			sigs.addCosign(desc, subject)
			continue
		}
		refs, err := descriptorRefs(desc)
		if err != nil {
			return nil, fmt.Errorf("OCI layout index.json manifests[%d]: %w", i, err)
		}
		var img v1.Image
		switch {
		case desc.MediaType.IsImage():
			img, err = ii.Image(desc.Digest)
		case desc.MediaType.IsIndex():
			img, err = platformImage(ii, desc.Digest)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", desc.Digest, err)
		}
		if desc.MediaType.IsImage() {
			// (platformImage checks an index and the image it picks.)
			if err := verifyManifest(img, desc.Digest); err != nil {
				return nil, err
			}
			m, err := img.Manifest()
			if err != nil {
				return nil, fmt.Errorf("read manifest %s: %w", desc.Digest, err)
			}
			if m.Subject != nil {
				if isBundleReferrer(desc, m) {
					sigs.addBundle(img, desc, m.Subject.Digest.String())
				}
				continue
			}
		}
		src := layoutSource(img, refs)
		src.admitted.img = policy.Image{Transport: policy.TransportOCIArchive, Digest: desc.Digest.String()}
		if len(refs) > 0 {
			src.admitted.img.Reference = refs[0]
		}
		srcs = append(srcs, src)
	}
	if cosignSigs != nil {
		// cosign save writes one image and its signatures; without its
		// image entry, the only image of the layout is what they sign.
		switch {
		case cosignImage != nil:
			sigs.addCosign(*cosignSigs, cosignImage.Digest.String())
		case len(srcs) == 1:
			sigs.addCosign(*cosignSigs, srcs[0].admitted.img.Digest)
		}
	}
	for i := range srcs {
		a := &srcs[i].admitted
		a.img.Signatures, a.sigErrs = sigs.of(a.img.Digest)
	}
	return srcs, nil
}

// layoutSource reads an image of an OCI layout, each compressed layer checked
// against the digest and size its manifest gives it as it is read: the
// manifest (whose digest a signature is over) names the blobs by digest,
// and a blob changed after signing is refused even if it unpacks.
func layoutSource(img v1.Image, refs []string) source {
	src := imageSource(img, refs)
	// The config is read again when it is staged: a layout directory is
	// read in place, and what was checked before (verifyManifest) may have
	// been changed since. What is recorded is what the manifest names.
	src.config = func() ([]byte, error) {
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		raw, err := img.RawConfigFile()
		if err != nil {
			return nil, err
		}
		if got, _, err := v1.SHA256(bytes.NewReader(raw)); err != nil || got != m.Config.Digest {
			return nil, fmt.Errorf("config %s: content has digest %s: corrupt archive", m.Config.Digest, got)
		}
		return raw, nil
	}
	src.layer = func(d v1.Hash) (io.ReadCloser, error) {
		l, err := img.LayerByDiffID(d)
		if err != nil {
			return nil, err
		}
		digest, err := l.Digest()
		if err != nil {
			return nil, err
		}
		size, err := l.Size()
		if err != nil {
			return nil, err
		}
		if digest.Algorithm != "sha256" {
			return nil, fmt.Errorf("layer blob %s: unsupported digest algorithm", digest)
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		return uncompressed(&verifiedReader{rc: rc, name: "layer blob " + digest.String(), want: digest.String(), size: size, h: sha256.New()}, "layer blob "+digest.String())
	}
	return src
}

// verifiedReader reads a blob and fails at its end, or as soon as it is longer
// than promised, unless it has the digest and size its descriptor gives it.
// Closing it reads what is left first, so that a reader stopping early (a tar
// ends before its blob does) still checks the whole blob.
type verifiedReader struct {
	rc   io.ReadCloser
	name string
	want string
	size int64
	h    hash.Hash
	n    int64
	done bool
	err  error
}

func (v *verifiedReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.size {
		v.err = fmt.Errorf("%s: longer than its %d bytes: corrupt archive", v.name, v.size)
		return 0, v.err
	}
	if errors.Is(err, io.EOF) {
		v.done = true
		if got := "sha256:" + hex.EncodeToString(v.h.Sum(nil)); got != v.want || v.n != v.size {
			v.err = fmt.Errorf("%s: content has digest %s: corrupt archive", v.name, got)
			return n, v.err
		}
	}
	return n, err
}

func (v *verifiedReader) Close() error {
	if !v.done && v.err == nil {
		_, _ = io.Copy(io.Discard, v)
	}
	cerr := v.rc.Close()
	if v.err != nil {
		return v.err
	}
	return cerr
}

// verifyManifest checks that img's manifest and config have the digests that name them.
func verifyManifest(img v1.Image, want v1.Hash) error {
	got, err := img.Digest()
	if err != nil {
		return fmt.Errorf("read manifest %s: %w", want, err)
	}
	if got != want {
		return fmt.Errorf("manifest %s: content has digest %s: corrupt archive", want, got)
	}
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("read manifest %s: %w", want, err)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("read config %s: %w", m.Config.Digest, err)
	}
	if cfg != m.Config.Digest {
		return fmt.Errorf("config %s: content has digest %s: corrupt archive", m.Config.Digest, cfg)
	}
	return nil
}

// platformImage picks the image for this machine out of the index h names.
func platformImage(ii v1.ImageIndex, h v1.Hash) (v1.Image, error) {
	child, err := ii.ImageIndex(h)
	if err != nil {
		return nil, err
	}
	// The index is what a signature is over: its bytes must be those h names.
	got, err := child.Digest()
	if err != nil {
		return nil, err
	}
	if got != h {
		return nil, fmt.Errorf("index %s: content has digest %s: corrupt archive", h, got)
	}
	im, err := child.IndexManifest()
	if err != nil {
		return nil, err
	}
	want := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, desc := range im.Manifests {
		if desc.MediaType.IsImage() && desc.Platform != nil && desc.Platform.Satisfies(want) {
			img, err := child.Image(desc.Digest)
			if err != nil {
				return nil, err
			}
			return img, verifyManifest(img, desc.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s in index", want.OS, want.Architecture)
}

// descriptorRefs are the normalised references an OCI index entry gives its image:
// containerd's full name if there is one, else org.opencontainers.image.ref.name.
func descriptorRefs(desc v1.Descriptor) ([]string, error) {
	key := annotationContainerdName
	ref := desc.Annotations[key]
	if ref == "" {
		key = annotationRefName
		ref = desc.Annotations[key]
	}
	if ref == "" {
		return nil, nil
	}
	norm, err := Normalize(ref)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", key, err)
	}
	// A name by digest names that manifest: a pod pinned to it must not
	// get another image that an archive called so.
	if _, d, ok := strings.Cut(norm, "@"); ok && d != desc.Digest.String() {
		return nil, fmt.Errorf("annotation %s: %s names digest %s, not the image's %s", key, bound(norm), bound(d), desc.Digest)
	}
	return []string{norm}, nil
}

// uncompressed reads rc as it is, or through gzip or zstd when its first bytes
// say it is compressed. Closing the result closes rc.
func uncompressed(rc io.ReadCloser, name string) (io.ReadCloser, error) {
	zr, _, err := decompress(rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return readCloser{zr, func() error { zr.Close(); return rc.Close() }}, nil
}

// decompress reads r through gzip or zstd if its magic bytes say so, and names
// the compression ("" for none). Closing the result does not close r.
func decompress(r io.Reader) (io.ReadCloser, string, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, "", err
	}
	switch {
	case bytes.HasPrefix(magic, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, "", fmt.Errorf("gzip: %w", err)
		}
		return zr, "gzip", nil
	case bytes.HasPrefix(magic, magicZstd):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, "", fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), "zstd", nil
	}
	return io.NopCloser(br), "", nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// truncated says so when err is an unexpected EOF.
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("archive is truncated or not a tar: %w", err)
	}
	return err
}
