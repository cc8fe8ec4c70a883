package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// source is one image found in an archive, with the references the archive gives it.
type source struct {
	refs   []string
	config func() ([]byte, error)
	// layer opens the uncompressed tar of the layer with that diff ID.
	layer func(v1.Hash) (io.ReadCloser, error)
	// admitted is how the image arrived and the policy's verdict on it
	// (Store.admit), recorded with the image when it is committed.
	admitted admitted
}

// admitted is an image the policy let in: what the decision was made on
// (its manifest digest and signatures) and the verdict.
type admitted struct {
	img     policy.Image
	verdict policy.Verdict
	// sigErrs say what was wrong with signatures that could not be read,
	// for a refusal's message.
	sigErrs []error
}

// imageSource reads an image through go-containerregistry (an OCI layout).
func imageSource(img v1.Image, refs []string) source {
	return source{
		refs:   refs,
		config: img.RawConfigFile,
		layer: func(d v1.Hash) (io.ReadCloser, error) {
			l, err := img.LayerByDiffID(d)
			if err != nil {
				return nil, err
			}
			return l.Uncompressed()
		},
	}
}

// stagedLayer is a layer unpacked into the staging dir, not yet in the store.
type stagedLayer struct {
	dir  string
	size int64
}

// Import imports every image in the archive or OCI layout directory at path: an OCI
// archive (a tar of an OCI layout), an OCI layout directory, or a docker-archive
// (`docker save`), each plain, gzip- or zstd-compressed. Layers already in the store
// are not unpacked again. Nothing in the store changes unless every image of the
// archive reads back with the digests its manifests and configs promise, and
// everything it writes (a decompressed copy of the archive, the layers) leaves the
// reserve (WithReserve) free on the store's filesystem.
func (s *Store) Import(ctx context.Context, path string, opts ...TransferOption) ([]Image, error) {
	imgs, err := s.importPath(ctx, path, newMeter(transferOpts(opts)))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return imgs, nil
}

func (s *Store) importPath(ctx context.Context, path string, m *meter) ([]Image, error) {
	return s.importStaged(ctx, archiveScope(path), func(string, *space) (string, error) { return path, nil }, m)
}

// archiveScope is what a policy's oci-archive and docker-archive scopes are
// matched against for the archive at path: its absolute path, symbolic links
// resolved, as containers/image names an archive.
func archiveScope(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		return resolved
	}
	return abs
}

// ImportReader imports every image of the archive read from r (what Import
// reads from a file, but not a layout directory): r is first copied into the
// store's staging, charged to the reserve like a decompressed archive, so a
// stream that is too big stops before it fills the filesystem. A stream cut
// short, too big or not an archive leaves the store as it was.
func (s *Store) ImportReader(ctx context.Context, r io.Reader, opts ...TransferOption) ([]Image, error) {
	m := newMeter(transferOpts(opts))
	// A stream has no path: only a policy's transport-wide ("") scope
	// matches it.
	imgs, err := s.importStaged(ctx, "", func(staging string, sp *space) (string, error) {
		p := filepath.Join(staging, "stream")
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if m != nil {
			m.phase("reading", 0)
			r = meterReader{r, m}
		}
		n, err := io.Copy(spaceWriter{f, sp}, ctxReader{ctx, r})
		if err != nil {
			return "", fmt.Errorf("read stream: %w", err)
		}
		if n == 0 {
			return "", errors.New("read stream: empty")
		}
		return p, f.Close()
	}, m)
	if err != nil {
		return nil, fmt.Errorf("import from stream: %w", err)
	}
	return imgs, nil
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// importStaged imports the archive at the path open gives, which may write
// into the staging dir it gets, charged to the space it gets. Every image of
// the archive must pass the policy (scope is the archive's, for the policy's
// archive transports) before anything of it is staged: one refused image
// refuses the whole archive, as one corrupt image does, so that an archive
// is in the store whole or not at all.
func (s *Store) importStaged(ctx context.Context, scope string, open func(staging string, sp *space) (string, error), m *meter) ([]Image, error) {
	staging, err := os.MkdirTemp(s.tmpDir(), stagingPrefix()+"import-")
	if err != nil {
		return nil, fmt.Errorf("make staging dir: %w", err)
	}
	defer os.RemoveAll(staging)
	sp, err := s.newSpace()
	if err != nil {
		return nil, err
	}
	defer sp.release()
	path, err := open(staging, sp)
	if err != nil {
		return nil, err
	}

	srcs, err := openArchive(path, staging, sp, m)
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, errors.New("no image in archive")
	}
	for i := range srcs {
		if err := s.admitArchived(ctx, scope, &srcs[i]); err != nil {
			return nil, err
		}
	}
	return s.stageAll(ctx, srcs, staging, sp, nil, m)
}

// importSources stages and commits srcs through a staging dir of its own
// (named with prefix), each image passed through edit (if not nil) first.
func (s *Store) importSources(ctx context.Context, prefix string, srcs []source, edit func(*Image)) ([]Image, error) {
	staging, err := os.MkdirTemp(s.tmpDir(), stagingPrefix()+prefix)
	if err != nil {
		return nil, fmt.Errorf("make staging dir: %w", err)
	}
	defer os.RemoveAll(staging)
	sp, err := s.newSpace()
	if err != nil {
		return nil, err
	}
	defer sp.release()
	return s.stageAll(ctx, srcs, staging, sp, edit, nil)
}

func (s *Store) stageAll(ctx context.Context, srcs []source, staging string, sp *space, edit func(*Image), m *meter) ([]Image, error) {
	known, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	if m != nil {
		m.phase("unpacking", 0)
		m.total(s.layersToUnpack(srcs, known), 0)
	}
	layers := map[string]stagedLayer{}
	var imgs []Image
	var adms []admitted
	for _, src := range srcs {
		img, err := s.stage(ctx, src, staging, known, layers, sp, m)
		if err != nil {
			return nil, err
		}
		if edit != nil {
			edit(&img)
		}
		imgs = append(imgs, img)
		adms = append(adms, src.admitted)
	}
	return s.commit(imgs, adms, layers)
}

// layersToUnpack counts the layers of srcs that stage will unpack: those
// neither the store nor an earlier image of srcs has. A config that cannot
// be read counts nothing here; stage says what is wrong with it.
func (s *Store) layersToUnpack(srcs []source, known index) int {
	seen := map[string]bool{}
	n := 0
	for _, src := range srcs {
		raw, err := src.config()
		if err != nil {
			continue
		}
		var cfg imagespec.Image
		if json.Unmarshal(raw, &cfg) != nil {
			continue
		}
		for _, dd := range cfg.RootFS.DiffIDs {
			d := string(dd)
			if seen[d] {
				continue
			}
			seen[d] = true
			if _, ok := known.LayerSizes[d]; ok && s.hasLayer(d) {
				continue
			}
			n++
		}
	}
	return n
}

// stage reads an image's config and unpacks into staging, verifying their diff IDs,
// the layers that neither the store nor layers already has.
func (s *Store) stage(ctx context.Context, src source, staging string, known index, layers map[string]stagedLayer, sp *space, m *meter) (Image, error) {
	raw, err := src.config()
	if err != nil {
		return Image{}, fmt.Errorf("read image config: %w", err)
	}
	sum := sha256.Sum256(raw)
	id := "sha256:" + hex.EncodeToString(sum[:])
	var cfg imagespec.Image
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return Image{}, fmt.Errorf("parse image config %s: %w", id, err)
	}
	img := Image{ID: id, Refs: src.refs, Config: cfg.Config}
	if cfg.Created != nil {
		img.Created = *cfg.Created
	}
	for _, dd := range cfg.RootFS.DiffIDs {
		d, err := v1.NewHash(string(dd))
		if err != nil || d.Algorithm != "sha256" {
			return Image{}, fmt.Errorf("image %s: unsupported layer digest %q", id, dd)
		}
		diffID := d.String()
		img.Layers = append(img.Layers, diffID)
		if l, ok := layers[diffID]; ok {
			img.Size += l.size
			continue
		}
		if size, ok := known.LayerSizes[diffID]; ok && s.hasLayer(diffID) {
			img.Size += size
			continue
		}
		if err := ctx.Err(); err != nil {
			return Image{}, err
		}
		l, err := unpackFrom(ctx, src, d, filepath.Join(staging, "layers", d.Hex), sp, m)
		if err != nil {
			return Image{}, fmt.Errorf("image %s: %w", id, err)
		}
		m.layerDone()
		layers[diffID] = l
		img.Size += l.size
	}
	return img, nil
}

// unpackFrom unpacks the layer with diff ID d of src into dir and checks its digest.
func unpackFrom(ctx context.Context, src source, d v1.Hash, dir string, sp *space, m *meter) (stagedLayer, error) {
	rc, err := src.layer(d)
	if err != nil {
		return stagedLayer{}, fmt.Errorf("read layer %s: %w", d, err)
	}
	closed := false
	defer func() {
		if !closed {
			rc.Close()
		}
	}()
	var r io.Reader = rc
	if m != nil {
		r = meterReader{rc, m}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return stagedLayer{}, fmt.Errorf("unpack layer %s: %w", d, err)
	}
	size, digest, err := unpack(ctx, r, dir, sp)
	if err != nil {
		return stagedLayer{}, fmt.Errorf("unpack layer %s: %w", d, err)
	}
	// Closing checks what the source checks of the whole blob (an OCI
	// layout's compressed digest: layoutSource).
	closed = true
	if err := rc.Close(); err != nil {
		return stagedLayer{}, fmt.Errorf("layer %s: %w", d, err)
	}
	if digest != d.String() {
		return stagedLayer{}, fmt.Errorf("layer %s: content has digest %s: corrupt archive", d, digest)
	}
	return stagedLayer{dir: dir, size: size}, nil
}

func (s *Store) hasLayer(diffID string) bool {
	fi, err := os.Lstat(s.layerDir(diffID))
	return err == nil && fi.IsDir()
}

// commit moves staged layers into the store and records imgs in the index, under the
// store lock, each with how it was admitted (adms[i] for imgs[i]: recordLocked).
// A reference an image takes moves off the image that had it; an image
// left with no reference that way is forgotten. Until the index is written, every
// step is undone on failure: the staged layers go back to staging, new links go.
func (s *Store) commit(imgs []Image, adms []admitted, layers map[string]stagedLayer) (_ []Image, err error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var undo []func() error
	defer func() {
		if err == nil {
			return
		}
		for _, u := range slices.Backward(undo) {
			if uerr := u(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
			}
		}
	}()
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	if idx.LayerSizes == nil {
		idx.LayerSizes = map[string]int64{}
	}
	// Recorded first, in memory: an image the policy now refuses
	// (recordLocked) leaves nothing to undo. An archive may list one image
	// several times, once per reference.
	out := make([]Image, 0, len(imgs))
	now := time.Now().UTC()
	for k, img := range imgs {
		img.Imported = now
		img = idx.add(img)
		i := slices.IndexFunc(idx.Images, func(o Image) bool { return o.ID == img.ID })
		if err := s.recordLocked(&idx, i, adms[k]); err != nil {
			return nil, err
		}
		img = idx.Images[i]
		if j := slices.IndexFunc(out, func(o Image) bool { return o.ID == img.ID }); j >= 0 {
			out[j] = img
		} else {
			out = append(out, img)
		}
	}
	for diffID, l := range layers {
		if !s.hasLayer(diffID) {
			dst := s.layerDir(diffID)
			if err := os.Rename(l.dir, dst); err != nil {
				return nil, fmt.Errorf("store layer %s: %w", diffID, err)
			}
			undo = append(undo, func() error { return os.Rename(dst, l.dir) })
		}
		idx.LayerSizes[diffID] = l.size
	}
	for _, img := range imgs {
		for _, diffID := range img.Layers {
			// A concurrent Remove may have collected a layer this import found present.
			if !s.hasLayer(diffID) {
				return nil, fmt.Errorf("layer %s vanished during import; import again", diffID)
			}
			made, err := s.ensureLink(diffID)
			if err != nil {
				return nil, err
			}
			if made {
				link := s.linkPath(diffID)
				undo = append(undo, func() error { return os.Remove(link) })
			}
		}
	}
	unused, err := s.pruneLocked(&idx)
	if err != nil {
		return nil, err
	}
	if err := s.writeIndexLocked(idx); err != nil {
		return nil, err
	}
	// The import is done; layers left unused by the images it replaced are not its
	// business to fail on.
	if err := s.deleteLayers(unused); err != nil {
		s.logger.Warn("cannot delete unused layers after import", "err", err)
	}
	return out, nil
}

// add records img in idx, merging refs into an existing image with the same ID and
// moving refs off other images: one left with neither a ref nor a repo digest
// is dropped. It returns the image as recorded.
func (idx *index) add(img Image) Image {
	for i := range idx.Images {
		other := &idx.Images[i]
		if other.ID == img.ID {
			continue
		}
		other.Refs = slices.DeleteFunc(other.Refs, func(r string) bool { return slices.Contains(img.Refs, r) })
	}
	idx.Images = slices.DeleteFunc(idx.Images, func(o Image) bool {
		// A repo digest names the image still (find): a generation kept
		// for a rollback runs it by digest, and image GC removes it
		// once unused, as containerd keeps the image a tag moved off.
		return o.ID != img.ID && len(o.Refs) == 0 && len(o.RepoDigests) == 0 && len(img.Refs) > 0
	})
	for i := range idx.Images {
		if idx.Images[i].ID == img.ID {
			refs := append(slices.Clone(idx.Images[i].Refs), img.Refs...)
			slices.Sort(refs)
			img.Refs = slices.Compact(refs)
			img.Pinned = idx.Images[i].Pinned
			if !idx.Images[i].Imported.IsZero() {
				img.Imported = idx.Images[i].Imported
			}
			digests := append(slices.Clone(idx.Images[i].RepoDigests), img.RepoDigests...)
			slices.Sort(digests)
			img.RepoDigests = slices.Compact(digests)
			if img.Verification == nil {
				// How it arrived before stands until recordLocked
				// records how it arrived now.
				img.Digest, img.Transport, img.Verification = idx.Images[i].Digest, idx.Images[i].Transport, idx.Images[i].Verification
			}
			idx.Images[i] = img
			return img
		}
	}
	slices.Sort(img.Refs)
	img.Refs = slices.Compact(img.Refs)
	idx.Images = append(idx.Images, img)
	return img
}

// ensureLink makes the short symlink l/<hex[:12]> -> ../layers/<hex>, and says
// whether it had to.
func (s *Store) ensureLink(diffID string) (bool, error) {
	want := filepath.Join("..", "layers", digestHex(diffID))
	got, err := os.Readlink(s.linkPath(diffID))
	if err == nil {
		if got != want {
			return false, fmt.Errorf("layer link %s points to %s, not %s", s.linkPath(diffID), got, want)
		}
		return false, nil
	}
	if err := os.Symlink(want, s.linkPath(diffID)); err != nil {
		// A Prepare beside this one (under the shared lock) made it first.
		if got, rerr := os.Readlink(s.linkPath(diffID)); errors.Is(err, fs.ErrExist) && rerr == nil && got == want {
			return false, nil
		}
		return false, fmt.Errorf("link layer %s: %w", diffID, err)
	}
	return true, nil
}
