// Package image is staticpodd's local image store: images imported from OCI archives,
// OCI layout directories and docker-archive tarballs, their layers unpacked once each
// into directories that overlayfs stacks into a container's root filesystem.
//
// On disk, under the store's root:
//
//	lock             flock(2)ed by every change, so the CLI and the daemon can share the store
//	index.json       the images, their references and how each arrived (manifest
//	                 digest, transport, the policy's verdict), replaced atomically
//	layers/<hex>/    one unpacked layer per uncompressed digest (diff ID), an overlay lowerdir
//	l/<short>        a short symlink to each layer dir, to keep overlay mount options short
//	snapshots/<key>/ a container's upper, work and mounted rootfs directories
//	signatures/<hex>.json the signatures an image's manifest digest <hex> arrived
//	                 with (bounded), so a policy set later verifies it again offline
//	tmp/             staging for imports in progress
package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Image is one image in the store.
type Image struct {
	ID     string                // sha256:… of the image config
	Refs   []string              // normalised references, sorted
	Config imagespec.ImageConfig // Entrypoint, Cmd, Env, WorkingDir, User…
	// Layers are the layers' uncompressed digests (diff IDs), base first. The same
	// layer shipped gzip-compressed, zstd-compressed or plain is stored once.
	Layers  []string
	Size    int64 // bytes of the layers, uncompressed
	Created time.Time
	// Imported is when the store first got the image (the kubelet's
	// firstDetected, which imageMinimumGCAge counts from); zero for images
	// imported before the store recorded it.
	Imported time.Time `json:",omitzero"`
	// Pinned images are never removed by image garbage collection.
	Pinned bool `json:",omitempty"`
	// RepoDigests are the repository@manifest-digest references the image was
	// pulled by (docker.io/library/nginx@sha256:…); none for an imported one.
	RepoDigests []string `json:",omitempty"`
	// Digest is the manifest digest the image arrived with (pulled, or
	// imported from an OCI layout): what signatures are over. "" for a
	// docker-archive import, which has no manifest.
	Digest string `json:",omitempty"`
	// Transport is how it last arrived (policy.TransportDocker for a pull,
	// policy.TransportOCIArchive or TransportDockerArchive for an import),
	// which SetPolicy checks it under again.
	Transport string `json:",omitempty"`
	// Verification is the image policy's last verdict on it (nil for an
	// image the store got before it recorded verdicts, until SetPolicy).
	// A Rejected image stays in the store, but Prepare refuses it.
	Verification *policy.Verdict `json:",omitempty"`
}

// Store is a local image store rooted at one directory.
type Store struct {
	root   string
	logger *slog.Logger
	// importQuiet is how long a file in the import folder must go unwritten before
	// an import is tried.
	importQuiet time.Duration
	// reservePercent of the filesystem an import leaves free (WithReserve).
	reservePercent int
	// statfs tells the free space and size of the filesystem holding a path.
	statfs func(string) (free, size uint64, err error)
	// statinodes tells the free inodes and the inodes of that filesystem.
	statinodes func(string) (free, total uint64, err error)
	// space is what the imports running at once have charged.
	space sharedSpace
	// keyMu serialises the Prepares of one snapshot key (striped by the
	// key's hash), which run under the shared lock side by side with the
	// Prepares of other keys.
	keyMu [keyStripes]sync.Mutex
	// policy decides what may enter the store (nil: everything).
	policy atomic.Pointer[policy.Policy]
}

const keyStripes = 32

type index struct {
	Images []Image `json:"images"`
	// LayerSizes are the uncompressed sizes of the layers in layers/, by diff ID.
	LayerSizes map[string]int64 `json:"layerSizes,omitempty"`
}

// Open opens the store at root, creating it if needed, and removes what imports that
// died half-way left behind.
func Open(root string, logger *slog.Logger, opts ...Option) (*Store, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", root, err)
	}
	s := &Store{root: root, logger: logger, importQuiet: time.Second, reservePercent: DefaultReservePercent, statfs: statfs, statinodes: statinodes}
	for _, o := range opts {
		o(s)
	}
	for _, d := range []string{root, s.layersDir(), s.linksDir(), s.snapshotsDir(), s.tmpDir(), s.signaturesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open image store %s: %w", root, err)
		}
	}
	if err := s.cleanStaging(); err != nil {
		return nil, fmt.Errorf("open image store %s: %w", root, err)
	}
	return s, nil
}

// Root is the directory the store lives in.
func (s *Store) Root() string { return s.root }

func (s *Store) layersDir() string    { return filepath.Join(s.root, "layers") }
func (s *Store) linksDir() string     { return filepath.Join(s.root, "l") }
func (s *Store) snapshotsDir() string { return filepath.Join(s.root, "snapshots") }
func (s *Store) tmpDir() string       { return filepath.Join(s.root, "tmp") }
func (s *Store) indexPath() string    { return filepath.Join(s.root, "index.json") }

// layerDir is where the layer with diff ID digest ("sha256:<hex>") is unpacked.
func (s *Store) layerDir(digest string) string {
	return filepath.Join(s.layersDir(), digestHex(digest))
}

// linkPath is the short symlink to a layer's directory.
func (s *Store) linkPath(digest string) string {
	return filepath.Join(s.linksDir(), digestHex(digest)[:12])
}

func digestHex(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	return hex
}

// lock takes the store's exclusive lock; the returned func releases it.
func (s *Store) lock() (func(), error) { return s.flock(unix.LOCK_EX) }

// sharedLock is lock for what may run side by side with itself but not
// with a writer of the index or a remover of layers: preparing snapshots.
func (s *Store) sharedLock() (func(), error) { return s.flock(unix.LOCK_SH) }

func (s *Store) flock(how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.root, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock image store: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock image store: %w", err)
	}
	return func() { f.Close() }, nil
}

// cleanStaging removes staging dirs of imports whose process is gone.
func (s *Store) cleanStaging() error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if pidAlive(stagingPID(e.Name())) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			return fmt.Errorf("remove stale staging dir: %w", err)
		}
	}
	return nil
}

func (s *Store) readIndex() (index, error) {
	var idx index
	b, err := os.ReadFile(s.indexPath())
	if errors.Is(err, os.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return idx, fmt.Errorf("read image index: %w", err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return idx, fmt.Errorf("read image index %s: %w", s.indexPath(), err)
	}
	if err := idx.check(); err != nil {
		return idx, fmt.Errorf("read image index %s: %w", s.indexPath(), err)
	}
	return idx, nil
}

// check refuses an index naming an image or a layer by anything but a sha256
// digest.
func (idx index) check() error {
	for _, img := range idx.Images {
		if err := checkDigest(img.ID); err != nil {
			return fmt.Errorf("image: %w", err)
		}
		if img.Digest != "" {
			if err := checkDigest(img.Digest); err != nil {
				return fmt.Errorf("image %s: manifest: %w", img.ID, err)
			}
		}
		for _, l := range img.Layers {
			if err := checkDigest(l); err != nil {
				return fmt.Errorf("image %s: layer: %w", img.ID, err)
			}
		}
	}
	for l := range idx.LayerSizes {
		if err := checkDigest(l); err != nil {
			return fmt.Errorf("layer sizes: %w", err)
		}
	}
	return nil
}

// writeIndexLocked replaces index.json atomically: write, fsync, rename. The
// signatures kept for manifest digests no image has any more go after.
func (s *Store) writeIndexLocked(idx index) error {
	slices.SortFunc(idx.Images, func(a, b Image) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	if err := atomicfile.Write(s.indexPath(), b); err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	// The index is written: signatures left over are not its business
	// to fail on.
	if err := s.pruneSignatures(idx); err != nil {
		s.logger.Warn("cannot remove unused kept signatures", "err", err)
	}
	return nil
}

// List returns every image in the store, sorted by first reference.
func (s *Store) List() ([]Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(idx.Images, func(a, b Image) int {
		return strings.Compare(firstRef(a), firstRef(b))
	})
	return idx.Images, nil
}

func firstRef(img Image) string {
	if len(img.Refs) > 0 {
		return img.Refs[0]
	}
	return img.ID
}

// Get finds an image by reference (normalised first), by ID, or by an unambiguous ID
// prefix of at least 12 hex digits. A missing image is an error wrapping
// podspec.ErrImageNotPresent.
func (s *Store) Get(ref string) (Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	i, err := find(idx, ref)
	if err != nil {
		return Image{}, err
	}
	return idx.Images[i], nil
}

// find returns the index in idx.Images of the image ref names. A ref that is
// neither a valid reference nor an ID (prefix) is an error saying why.
func find(idx index, ref string) (int, error) {
	// A whole ID names that image alone, as containerd's ParseAnyReference
	// takes it: the runtime starts a container from the ID its pull
	// verified, and "sha256:<hex>" read as a name (docker.io/library/sha256,
	// tag <hex>) could be another image's reference.
	if sha256Digest().MatchString(ref) {
		if i := slices.IndexFunc(idx.Images, func(img Image) bool { return img.ID == ref }); i >= 0 {
			return i, nil
		}
		return -1, fmt.Errorf("image %s: %w", ref, podspec.ErrImageNotPresent)
	}
	norm, nerr := Normalize(ref)
	if nerr == nil {
		for i, img := range idx.Images {
			// A repo digest names the image pulled by tag too: the
			// manifest digest the tag named then.
			if slices.Contains(img.Refs, norm) || slices.Contains(img.RepoDigests, norm) {
				return i, nil
			}
		}
	}
	hex := strings.TrimPrefix(ref, "sha256:")
	isID := len(hex) >= 12 && len(hex) <= 64 && strings.Trim(hex, "0123456789abcdef") == ""
	if nerr != nil && !isID {
		return -1, nerr
	}
	if isID {
		found := -1
		for i, img := range idx.Images {
			if strings.HasPrefix(digestHex(img.ID), hex) {
				if found >= 0 {
					return -1, fmt.Errorf("image %s: ambiguous ID prefix", ref)
				}
				found = i
			}
		}
		if found >= 0 {
			return found, nil
		}
	}
	return -1, fmt.Errorf("image %s: %w", ref, podspec.ErrImageNotPresent)
}

// Remove removes the reference ref (or, given an image ID, the image with all its
// references). An image left with no reference is forgotten, and layers that no image
// and no snapshot use any more are deleted; layers under a running container's
// snapshot stay until the snapshot is released.
func (s *Store) Remove(ref string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	i, err := find(idx, ref)
	if err != nil {
		return fmt.Errorf("remove image: %w", err)
	}
	img := &idx.Images[i]
	norm, nerr := Normalize(ref)
	if nerr == nil && slices.Contains(img.Refs, norm) {
		img.Refs = slices.DeleteFunc(img.Refs, func(r string) bool { return r == norm })
	} else {
		img.Refs = nil
	}
	if len(img.Refs) == 0 {
		idx.Images = slices.Delete(idx.Images, i, i+1)
	}
	if err := s.saveLocked(idx); err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	s.forgetUse(idx)
	return nil
}

// saveLocked writes idx and then deletes the layers that neither an image of idx
// nor a snapshot uses.
func (s *Store) saveLocked(idx index) error {
	unused, err := s.pruneLocked(&idx)
	if err != nil {
		return err
	}
	if err := s.writeIndexLocked(idx); err != nil {
		return err
	}
	return s.deleteLayers(unused)
}

// pruneLocked drops from idx the sizes of layers that neither an image of idx nor
// a snapshot uses, and returns those of them in layers/.
func (s *Store) pruneLocked(idx *index) ([]string, error) {
	used := map[string]bool{}
	for _, img := range idx.Images {
		for _, l := range img.Layers {
			used[l] = true
		}
	}
	snaps, err := s.snapshotMetas()
	if err != nil {
		return nil, err
	}
	for _, m := range snaps {
		for _, l := range m.Layers {
			used[l] = true
		}
	}
	entries, err := os.ReadDir(s.layersDir())
	if err != nil {
		return nil, fmt.Errorf("list layers: %w", err)
	}
	var unused []string
	for _, e := range entries {
		digest := "sha256:" + e.Name()
		if checkDigest(digest) != nil {
			continue // not a layer this store made: not its to delete
		}
		if !used[digest] {
			unused = append(unused, digest)
		}
	}
	for l := range idx.LayerSizes {
		if !used[l] {
			delete(idx.LayerSizes, l)
		}
	}
	return unused, nil
}

func (s *Store) deleteLayers(digests []string) error {
	var errs []error
	for _, digest := range digests {
		s.logger.Debug("deleting unused layer", "layer", digest)
		if err := s.deleteLayer(digest); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) deleteLayer(digest string) error {
	if err := os.Remove(s.linkPath(digest)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete layer link %s: %w", digest, err)
	}
	// Move it out of layers/ first, so a crash mid-delete leaves no half layer.
	doomed, err := os.MkdirTemp(s.tmpDir(), stagingPrefix()+"gc-")
	if err != nil {
		return fmt.Errorf("delete layer %s: %w", digest, err)
	}
	if err := os.Rename(s.layerDir(digest), filepath.Join(doomed, "layer")); err != nil {
		return fmt.Errorf("delete layer %s: %w", digest, err)
	}
	if err := os.RemoveAll(doomed); err != nil {
		return fmt.Errorf("delete layer %s: %w", digest, err)
	}
	return nil
}
