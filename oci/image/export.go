package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Export writes the images refs name to w as one tar that is both an OCI
// image layout (oci-layout, index.json, blobs/sha256/…) and a docker-archive
// (manifest.json naming the same blobs), so that Import, `docker load`,
// `podman load` and skopeo's oci-archive read it back.
//
// The store keeps layers unpacked, not as the tars they came in: each layer is
// written again as a tar made from its directory, the same bytes each time
// (entries sorted, no access or change times, no owner names), and overlayfs's
// whiteouts (0/0 character devices, trusted.overlay.opaque) turned back into
// OCI ones. A layer tar is a new diff ID unless the original was made the same
// way, so the exported image gets a new config, and so a new image ID; its
// references, config and content are the same. Layers are not compressed.
// The new manifest has a new digest, so the signatures an image arrived with,
// which are over the old one, are not written: an exported image must be
// signed again to pass a policy requiring a signature.
func (s *Store) Export(ctx context.Context, w io.Writer, refs []string, opts ...TransferOption) error {
	if len(refs) == 0 {
		return errors.New("export: no image named")
	}
	// Shared: no removal may delete a layer being read.
	unlock, err := s.sharedLock()
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	m := newMeter(transferOpts(opts))
	if m != nil {
		layers, bytes := exportSize(idx, refs)
		m.total(layers, bytes)
		w = meterWriter{w, m}
	}
	ex := &exporter{s: s, ctx: ctx, tw: tar.NewWriter(w), blobs: map[string]bool{}, layers: map[string]layerBlob{}, m: m}
	if err := ex.dir("blobs/"); err != nil {
		return err
	}
	if err := ex.dir("blobs/sha256/"); err != nil {
		return err
	}
	var index imagespec.Index
	index.SchemaVersion, index.MediaType = 2, imagespec.MediaTypeImageIndex
	var docker []dockerManifest
	done := map[string]int{} // image ID → index in docker
	for _, ref := range refs {
		i, err := find(idx, ref)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		img := idx.Images[i]
		names := img.Refs // an image named by ID exports with all its names
		if norm, err := Normalize(ref); err == nil && slices.Contains(img.Refs, norm) {
			names = []string{norm}
		}
		j, ok := done[img.ID]
		if !ok {
			m, desc, err := ex.image(img)
			if err != nil {
				return fmt.Errorf("export %s: %w", ref, err)
			}
			j = len(docker)
			done[img.ID] = j
			docker = append(docker, m)
			if len(names) == 0 {
				index.Manifests = append(index.Manifests, desc)
			}
			for _, n := range names {
				d := desc
				d.Annotations = map[string]string{annotationContainerdName: n, annotationRefName: refName(n)}
				index.Manifests = append(index.Manifests, d)
			}
			docker[j].desc = desc
		} else {
			for _, n := range names {
				if slices.ContainsFunc(index.Manifests, func(d imagespec.Descriptor) bool { return d.Annotations[annotationContainerdName] == n }) {
					continue
				}
				d := docker[j].desc
				d.Annotations = map[string]string{annotationContainerdName: n, annotationRefName: refName(n)}
				index.Manifests = append(index.Manifests, d)
			}
		}
		for _, n := range names {
			// RepoTags holds tags only: docker load refuses a digest there.
			if _, err := name.NewTag(n, name.StrictValidation); err == nil && !strings.Contains(n, "@") && !slices.Contains(docker[j].RepoTags, n) {
				docker[j].RepoTags = append(docker[j].RepoTags, n)
			}
		}
	}
	layoutFile, _ := json.Marshal(imagespec.ImageLayout{Version: imagespec.ImageLayoutVersion})
	if err := ex.file(imagespec.ImageLayoutFile, layoutFile); err != nil {
		return err
	}
	b, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := ex.file(imagespec.ImageIndexFile, b); err != nil {
		return err
	}
	if b, err = json.Marshal(docker); err != nil {
		return err
	}
	if err := ex.file("manifest.json", b); err != nil {
		return err
	}
	if err := ex.tw.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if m != nil {
		m.report(true)
	}
	return nil
}

// exportSize is how many layers an export of refs writes, and about how
// many bytes: the sum of their unpacked sizes, which their tars exceed by
// their headers. A ref that names nothing counts nothing (Export says so).
func exportSize(idx index, refs []string) (layers int, bytes int64) {
	seen := map[string]bool{}
	for _, ref := range refs {
		i, err := find(idx, ref)
		if err != nil {
			continue
		}
		for _, l := range idx.Images[i].Layers {
			if !seen[l] {
				seen[l] = true
				layers++
				bytes += idx.LayerSizes[l]
			}
		}
	}
	return layers, bytes
}

// refName is what org.opencontainers.image.ref.name holds for a reference:
// its tag, as containerd's export writes it, or the whole reference when it
// has none.
func refName(ref string) string {
	if t, err := name.NewTag(ref, name.StrictValidation); err == nil && strings.Contains(ref, ":"+t.TagStr()) {
		return t.TagStr()
	}
	return ref
}

// dockerManifest is one entry of a docker-archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
	desc     imagespec.Descriptor
}

type layerBlob struct {
	digest string
	size   int64
}

type exporter struct {
	s      *Store
	ctx    context.Context
	tw     *tar.Writer
	blobs  map[string]bool      // digests written
	layers map[string]layerBlob // by the store's diff ID
	m      *meter               // nil: no progress told
}

// image writes img's layers, config and manifest, and returns its docker
// manifest.json entry and the descriptor of its manifest.
func (ex *exporter) image(img Image) (dockerManifest, imagespec.Descriptor, error) {
	var m dockerManifest
	manifest := imagespec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imagespec.MediaTypeImageManifest}
	cfg := imagespec.Image{
		Platform: imagespec.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Config:   img.Config,
		RootFS:   imagespec.RootFS{Type: "layers"},
	}
	if !img.Created.IsZero() {
		created := img.Created
		cfg.Created = &created
	}
	for _, l := range img.Layers {
		lb, err := ex.layer(l)
		if err != nil {
			return m, imagespec.Descriptor{}, err
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, digest.Digest(lb.digest))
		manifest.Layers = append(manifest.Layers, imagespec.Descriptor{MediaType: imagespec.MediaTypeImageLayer, Digest: digest.Digest(lb.digest), Size: lb.size})
		m.Layers = append(m.Layers, blobPath(lb.digest))
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		return m, imagespec.Descriptor{}, err
	}
	cd, err := ex.blob(cb)
	if err != nil {
		return m, imagespec.Descriptor{}, err
	}
	manifest.Config = imagespec.Descriptor{MediaType: imagespec.MediaTypeImageConfig, Digest: digest.Digest(cd), Size: int64(len(cb))}
	m.Config = blobPath(cd)
	mb, err := json.Marshal(manifest)
	if err != nil {
		return m, imagespec.Descriptor{}, err
	}
	md, err := ex.blob(mb)
	if err != nil {
		return m, imagespec.Descriptor{}, err
	}
	return m, imagespec.Descriptor{MediaType: imagespec.MediaTypeImageManifest, Digest: digest.Digest(md), Size: int64(len(mb))}, nil
}

func blobPath(d string) string { return "blobs/sha256/" + digestHex(d) }

// blob writes b as a blob, once, and returns its digest.
func (ex *exporter) blob(b []byte) (string, error) {
	sum := sha256.Sum256(b)
	d := "sha256:" + hex.EncodeToString(sum[:])
	if ex.blobs[d] {
		return d, nil
	}
	ex.blobs[d] = true
	return d, ex.file(blobPath(d), b)
}

var exportTime = time.Unix(0, 0).UTC()

func (ex *exporter) dir(name string) error {
	return ex.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: exportTime, Format: tar.FormatPAX})
}

func (ex *exporter) file(name string, b []byte) error {
	if err := ex.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: exportTime, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	if _, err := ex.tw.Write(b); err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	return nil
}

// layer writes the layer with the store's diff ID l as a blob: a first pass
// over its directory finds the tar's size and digest, which the blob's tar
// header and name need, a second writes it and checks it came out the same.
func (ex *exporter) layer(l string) (layerBlob, error) {
	if lb, ok := ex.layers[l]; ok {
		return lb, nil
	}
	dir := ex.s.layerDir(l)
	h := sha256.New()
	cw := &countWriter{w: h}
	if err := tarLayerDir(ex.ctx, dir, cw); err != nil {
		return layerBlob{}, fmt.Errorf("layer %s: %w", l, err)
	}
	lb := layerBlob{digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), size: cw.n}
	ex.layers[l] = lb
	if ex.blobs[lb.digest] {
		ex.m.layerDone()
		return lb, nil
	}
	ex.blobs[lb.digest] = true
	if err := ex.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: blobPath(lb.digest), Mode: 0o644, Size: lb.size, ModTime: exportTime, Format: tar.FormatPAX}); err != nil {
		return layerBlob{}, fmt.Errorf("layer %s: %w", l, err)
	}
	h2 := sha256.New()
	if err := tarLayerDir(ex.ctx, dir, io.MultiWriter(ex.tw, h2)); err != nil {
		return layerBlob{}, fmt.Errorf("layer %s: %w", l, err)
	}
	if got := "sha256:" + hex.EncodeToString(h2.Sum(nil)); got != lb.digest {
		return layerBlob{}, fmt.Errorf("layer %s changed while exported (%s, then %s)", l, lb.digest, got)
	}
	ex.m.layerDone()
	return lb, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
