package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
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
		m.add(in.n) // what telling the compression read
		in.m = m
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

// archiveReader counts what is read of an archive, and tells m once set.
type archiveReader struct {
	r io.Reader
	n int64
	m *meter
}

func (a *archiveReader) Read(b []byte) (int, error) {
	n, err := a.r.Read(b)
	a.n += int64(n)
	a.m.add(int64(n))
	return n, err
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

// layoutImages lists the images of the OCI layout in dir, with their references. An
// image index inside the layout (a multi-platform image) gives the image for this
// machine's platform.
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
	var srcs []source
	for i, desc := range im.Manifests {
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
		if err := verifyManifest(img, desc.Digest); err != nil {
			return nil, err
		}
		srcs = append(srcs, imageSource(img, refs))
	}
	return srcs, nil
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
