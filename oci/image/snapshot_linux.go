package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// snapshotMeta is snapshots/<key>/meta.json: what a snapshot stacks, so its layers
// outlive the image's removal and a remount after a reboot uses the same ones.
type snapshotMeta struct {
	Key    string   `json:"-"`
	Image  string   `json:"image"`
	Layers []string `json:"layers"`
}

func (s *Store) snapshotDir(key string) string { return filepath.Join(s.snapshotsDir(), key) }

func validKey(key string) error {
	if key == "" || key == "." || key == ".." || strings.ContainsAny(key, "/:,\x00") || len(key) > 128 {
		return fmt.Errorf("invalid snapshot key %q", key)
	}
	return nil
}

// Prepare gives the container key a writable root filesystem over the image ref: an
// overlayfs whose lowerdirs are the image's layers and whose upper and work dirs are
// the container's own, mounted at <store>/snapshots/<key>/rootfs, the path it returns.
// Preparing a key that exists returns its rootfs, mounting it again if it is not
// mounted (after a reboot); it fails if the key was made from another image.
//
// Overlay options must fit in one page: lowerdirs are given as short symlinks
// (<store>/l/<12 hex digits>), so an image can have about 4000/(len(store)+16)
// layers, over 100 for the default store path.
func (s *Store) Prepare(key, ref string) (string, Image, error) {
	if err := validKey(key); err != nil {
		return "", Image{}, err
	}
	// Shared: the Prepares of a burst of starts do their mkdirs, fsync
	// and mount side by side (under the exclusive lock they queued, one
	// fsync each); what they must not meet is an import or a removal
	// rewriting the index or deleting layers, which take it exclusively.
	unlock, err := s.sharedLock()
	if err != nil {
		return "", Image{}, err
	}
	defer unlock()
	mu := &s.keyMu[keyStripe(key)]
	mu.Lock()
	defer mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return "", Image{}, err
	}
	i, err := find(idx, ref)
	if err != nil {
		return "", Image{}, fmt.Errorf("prepare snapshot %s: %w", key, err)
	}
	img := idx.Images[i]
	if v := img.Verification; v != nil && v.Decision == policy.Rejected {
		// Refused by the policy set after it arrived (SetPolicy): kept,
		// for what already runs it, but nothing new starts from it.
		return "", Image{}, fmt.Errorf("%w: image %s is rejected by the image policy: %s", policy.ErrSignatureValidationFailed, ref, v.Reason)
	}
	rootfs, err := s.prepareLocked(key, img)
	if err != nil {
		return "", Image{}, fmt.Errorf("prepare snapshot %s of %s: %w", key, ref, err)
	}
	return rootfs, img, nil
}

// keyStripe is the index in Store.keyMu of snapshot key's mutex.
func keyStripe(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % keyStripes)
}

func (s *Store) prepareLocked(key string, img Image) (string, error) {
	dir := s.snapshotDir(key)
	meta, err := readSnapshotMeta(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		meta = snapshotMeta{Image: img.ID, Layers: img.Layers}
		b, err := json.Marshal(meta)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		// Whole before its rename, which comes before the mount: a
		// snapshot without it is half made (snapshotMetas), which it is
		// after a power cut (nothing is mounted then), so its name is not
		// waited for (atomicfile.WriteContent: one wait on the disk where
		// Write makes two, before the container can run). Nor are the
		// snapshot directory's own names. The overlay's directories and
		// the image's last use are made while it waits on the disk.
		metaWritten := make(chan error, 1)
		go func() { metaWritten <- atomicfile.WriteContent(filepath.Join(dir, "meta.json"), b) }()
		var errs []error
		for _, d := range []string{"upper", "work", "rootfs", "empty"} {
			if err := mkdirOrDir(filepath.Join(dir, d)); err != nil {
				errs = append(errs, err)
				break
			}
		}
		if len(errs) == 0 {
			// A container is made from the image: its last use, for image GC.
			if err := s.touch(img.ID, time.Now()); err != nil {
				s.logger.Warn("cannot record the last use of an image", "image", img.ID, "err", err)
			}
		}
		if err := errors.Join(append(errs, <-metaWritten)...); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	case meta.Image != img.ID:
		return "", fmt.Errorf("snapshot exists for image %s", meta.Image)
	}
	rootfs := filepath.Join(dir, "rootfs")
	mounted, err := isMountPoint(rootfs)
	if err != nil || mounted {
		return rootfs, err
	}
	if err := s.mountOverlay(dir, meta.Layers); err != nil {
		return "", err
	}
	return rootfs, nil
}

// mkdirOrDir makes directory p, mode 0755, unless a directory (not a
// symlink to one) is there, as os.MkdirAll of a directory whose parent exists.
func mkdirOrDir(p string) error {
	err := os.Mkdir(p, 0o755)
	if errors.Is(err, fs.ErrExist) {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: p, Err: unix.ENOTDIR}
	}
	return err
}

func (s *Store) mountOverlay(dir string, layers []string) error {
	var lower []string
	for _, l := range slices.Backward(layers) { // overlay wants the top layer first
		if _, err := s.ensureLink(l); err != nil {
			return err
		}
		lower = append(lower, s.linkPath(l))
	}
	if len(lower) == 0 {
		lower = []string{filepath.Join(dir, "empty")}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s",
		strings.Join(lower, ":"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"))
	if overlayIndexOn() {
		// Lower layers are shared by many mounts; the inode index would tie them to one.
		opts += ",index=off"
	}
	if len(opts) >= os.Getpagesize() {
		return fmt.Errorf("overlay options for %d layers are %d bytes, over the %d-byte limit", len(layers), len(opts), os.Getpagesize()-1)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := unix.Mount("overlay", rootfs, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	// The kernel mounts an overlay read-only, and says so only in its own
	// log, when it cannot make its work dir (a full disk): a container
	// would run on a root filesystem it cannot write. Refuse it instead, so
	// the start fails and is retried (found by the chaos soak).
	var st unix.Statfs_t
	if err := unix.Statfs(rootfs, &st); err != nil || st.Flags&unix.ST_RDONLY != 0 {
		if uerr := unix.Unmount(rootfs, unix.MNT_DETACH); uerr != nil {
			return fmt.Errorf("mount overlay: read-only or unreadable (%v), and unmount: %w", err, uerr)
		}
		if err != nil {
			return fmt.Errorf("mount overlay: statfs %s: %w", rootfs, err)
		}
		return fmt.Errorf("mount overlay at %s: the kernel mounted it read-only, having failed to make its work dir (is the disk full?): %w", rootfs, unix.EROFS)
	}
	return nil
}

func overlayIndexOn() bool {
	b, err := os.ReadFile("/sys/module/overlay/parameters/index")
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// isMountPoint tells whether p is mounted on: its device differs from its parent's.
func isMountPoint(p string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(p), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// Release unmounts the snapshot key and removes its directories, then deletes layers
// that only it kept. Releasing a key that does not exist, or is half made, is fine.
//
// The unmount and removal run under the shared lock, beside other Releases and
// Prepares (a teardown of many pods); the exclusive lock, an index write and a
// scan of every snapshot are needed only when the snapshot may have kept
// layers that no image has any more.
func (s *Store) Release(key string) error {
	if err := validKey(key); err != nil {
		return err
	}
	dir := s.snapshotDir(key)
	layers, known, err := s.releaseDir(key, dir)
	if err != nil || layers == nil && known {
		return err // released before, or an error
	}
	if known {
		idx, err := s.readIndex()
		if err != nil {
			return err
		}
		if imagesHold(idx, layers) {
			return nil
		}
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	if err := s.saveLocked(idx); err != nil {
		return fmt.Errorf("release snapshot %s: %w", key, err)
	}
	return nil
}

// releaseDir unmounts and removes snapshot key's dir under the shared lock. It
// returns the layers the snapshot used, and known = false when its meta.json
// could not tell them (a half-made snapshot); nil layers and known for a
// snapshot that was not there.
func (s *Store) releaseDir(key, dir string) (layers []string, known bool, err error) {
	unlock, err := s.sharedLock()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	mu := &s.keyMu[keyStripe(key)]
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, true, nil
	}
	meta, merr := readSnapshotMeta(dir)
	if err := unmountAll(filepath.Join(dir, "rootfs")); err != nil {
		return nil, false, fmt.Errorf("release snapshot %s: %w", key, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, false, fmt.Errorf("release snapshot %s: %w", key, err)
	}
	if merr != nil {
		return nil, false, nil
	}
	return append([]string{}, meta.Layers...), true, nil
}

// imagesHold reports whether every layer is one of an image of idx: then a
// released snapshot of them leaves nothing to delete.
func imagesHold(idx index, layers []string) bool {
	held := map[string]bool{}
	for _, img := range idx.Images {
		for _, l := range img.Layers {
			held[l] = true
		}
	}
	for _, l := range layers {
		if !held[l] {
			return false
		}
	}
	return true
}

// unmountAll unmounts everything stacked on p; a busy mount is detached lazily.
func unmountAll(p string) error {
	for range 16 {
		mounted, err := isMountPoint(p)
		if errors.Is(err, os.ErrNotExist) || (err == nil && !mounted) {
			return nil
		}
		if err != nil {
			return err
		}
		err = unix.Unmount(p, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(p, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", p)
}

// Snapshots lists the keys of the snapshots in the store, mounted or not.
func (s *Store) Snapshots() ([]string, error) {
	entries, err := os.ReadDir(s.snapshotsDir())
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			keys = append(keys, e.Name())
		}
	}
	return keys, nil
}

func (s *Store) snapshotMetas() ([]snapshotMeta, error) {
	keys, err := s.Snapshots()
	if err != nil {
		return nil, err
	}
	var metas []snapshotMeta
	for _, k := range keys {
		m, err := readSnapshotMeta(s.snapshotDir(k))
		if errors.Is(err, os.ErrNotExist) {
			continue // half made: nothing mounted, no layer to keep
		}
		if err != nil {
			return nil, err
		}
		m.Key = k
		metas = append(metas, m)
	}
	return metas, nil
}

func readSnapshotMeta(dir string) (snapshotMeta, error) {
	var m snapshotMeta
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("read %s: %w", filepath.Join(dir, "meta.json"), err)
	}
	for _, l := range m.Layers {
		if err := checkDigest(l); err != nil {
			return m, fmt.Errorf("read %s: layer: %w", filepath.Join(dir, "meta.json"), err)
		}
	}
	return m, nil
}
