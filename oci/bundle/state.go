// Package bundle is staticpodd's signed bundle: one OCI artifact (a
// registry's, or an OCI layout, tarred or not) that carries a set of
// manifests, the ConfigMaps and Secret references they need and their
// images with their signatures, signed as a whole; and the bundles a node
// has applied, under <root-dir>/bundles.
//
// On disk:
//
//	bundles/lock              flock(2)ed by every change of state.json
//	bundles/state.json        which bundle runs, which ran before, and whether the running one is still on trial
//	bundles/<hex>/bundle.json a bundle's record (Record)
//	bundles/<hex>/manifests/  its manifests, as the file source reads a directory
package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// Record is one applied bundle, by the digest of its manifest.
type Record struct {
	Name    string    `json:"name"`
	Digest  string    `json:"digest"` // sha256:… of the bundle's manifest
	Created time.Time `json:"created,omitzero"`
	Applied time.Time `json:"applied"`
	// Signer is the policy's verdict on the bundle's signature, as the
	// store records an image's ("verified by key cosign.pub", "accepted").
	Signer string `json:"signer"`
	// Images are the images it brought, pinned while it runs.
	Images []Image `json:"images"`
	// Manifests are the file names under manifests/.
	Manifests []string `json:"manifests"`
	// RollbackAfter is how long it has to be Ready before the bundle it
	// replaced comes back (0: never rolled back).
	RollbackAfter time.Duration `json:"rollbackAfter,omitempty"`
}

// Image is one image of a bundle.
type Image struct {
	Ref    string `json:"ref"`    // as the manifests name it
	Digest string `json:"digest"` // the manifest digest verified and run
	ID     string `json:"id"`     // the store's image ID (config digest)
}

// State is bundles/state.json.
type State struct {
	// Current is the hex digest of the bundle the node runs ("" for none).
	Current string `json:"current,omitempty"`
	// Previous is the bundle Current replaced, kept (and its images pinned)
	// until Current is Ready, for a rollback.
	Previous string `json:"previous,omitempty"`
	// Trial says Current is not yet Ready; since when.
	Trial time.Time `json:"trial,omitzero"`
	// RolledBack says the last bundle applied was rolled back, and why.
	RolledBack *RolledBack `json:"rolledBack,omitempty"`
}

// RolledBack is a bundle that was not Ready in time.
type RolledBack struct {
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Limits on the records under bundles/: a record is written by Apply, but a
// root dir may be restored from anywhere.
const (
	maxStateBytes  = 64 << 10
	maxRecordBytes = 1 << 20
)

// Dir is the bundles dir of the root dir.
func Dir(rootDir string) string { return filepath.Join(rootDir, "bundles") }

// RecordDir is the dir of the bundle with the hex digest hex.
func RecordDir(rootDir, hex string) string { return filepath.Join(Dir(rootDir), hex) }

// ManifestsDir is the dir of the manifests of the bundle hex, as the file
// source reads a directory.
func ManifestsDir(rootDir, hex string) string {
	return filepath.Join(RecordDir(rootDir, hex), "manifests")
}

// LockState takes bundles/lock (flock, exclusive), making bundles/ if need
// be: every read-modify-write of state.json, and of the records it names,
// holds it, whether the CLI's apply or the daemon's bundle source does it.
// unlock releases it. Holders do only file work under it, never a network
// wait, so the wait for it is short.
func LockState(rootDir string) (unlock func(), err error) {
	if err := atomicfile.MkdirAll(Dir(rootDir), 0o700); err != nil {
		return nil, fmt.Errorf("bundles: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(Dir(rootDir), "lock"), os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bundles: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bundles: lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// ReadState reads bundles/state.json; a node that never applied a bundle has
// the zero State.
func ReadState(rootDir string) (State, error) {
	var st State
	p := filepath.Join(Dir(rootDir), "state.json")
	b, err := atomicfile.Read(p, maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", p, err)
	}
	for _, h := range []string{st.Current, st.Previous} {
		if h != "" && !validHex(h) {
			return State{}, fmt.Errorf("%s: %q is not a bundle's digest", p, h)
		}
	}
	return st, nil
}

// WriteState replaces bundles/state.json (atomically), under LockState.
func WriteState(rootDir string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(Dir(rootDir), "state.json"), append(b, '\n'))
}

// ReadRecord reads the record of the bundle hex (bundles/<hex>/bundle.json).
func ReadRecord(rootDir, hex string) (Record, error) {
	var r Record
	if !validHex(hex) {
		return r, fmt.Errorf("bundles: %q is not a bundle's digest", hex)
	}
	p := filepath.Join(RecordDir(rootDir, hex), "bundle.json")
	b, err := atomicfile.Read(p, maxRecordBytes)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", p, err)
	}
	return r, nil
}

// Hex is the hex of a sha256:… digest, as bundles/ names a bundle.
func Hex(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

func validHex(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
