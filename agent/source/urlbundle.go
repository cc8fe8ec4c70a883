package source

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"os"
	"path/filepath"
	"time"
)

// MediaTypeLayoutTar is the media type of an OCI image layout as a tar
// (image-spec's), which a manifest URL may serve a bundle as.
const MediaTypeLayoutTar = "application/vnd.oci.image.layout.v1+tar"

// bundleSniff is how much of a body tells a bundle from a manifest: a tar
// header's magic ends at 262.
const bundleSniff = 262

// sniffBundle is IsBundleBody of a body read through br, reading no more of
// it than it needs: nothing when the content type says, the two bytes of
// gzip's magic, else a tar header's first 262 bytes (or what there is of
// them: a short body is no bundle).
func sniffBundle(contentType string, br *bufio.Reader) bool {
	if IsBundleBody(contentType, nil) {
		return true
	}
	if head, _ := br.Peek(2); IsBundleBody("", head) {
		return true
	}
	head, _ := br.Peek(bundleSniff)
	return IsBundleBody("", head)
}

// errFetchTimeout is the cause of a request's end at its deadline.
var errFetchTimeout = errors.New("request timed out")

// timedOut is err as a deadline's when the request ended at its deadline.
func timedOut(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errFetchTimeout) {
		return context.DeadlineExceeded
	}
	return err
}

// IsBundleBody says whether a body a manifest URL serves, of content type
// contentType and beginning with head, is a bundle (an OCI layout, tarred,
// maybe gzipped) rather than a manifest: by its content type, or by the
// magic of gzip or of a tar header, which no YAML or JSON manifest begins
// with. What it holds is the applier's to verify.
func IsBundleBody(contentType string, head []byte) bool {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == MediaTypeLayoutTar {
		return true
	}
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return true
	}
	return len(head) >= 262 && string(head[257:262]) == "ustar"
}

// BundleStage is where the URL source keeps a bundle a URL serves while
// it is applied, and its bounds: its own, not a manifest's.
type BundleStage struct {
	Dir      string        // the staged file's directory
	MaxBytes int64         // a larger body is refused
	Timeout  time.Duration // of the body, from its first bytes
	// Room, when set, is what the filesystem of Dir can take now and
	// still keep its reserve free: a larger body is refused too. The
	// server chooses the body, up to MaxBytes: it must not fill the disk
	// the node's pods write to.
	Room func() (int64, error)
}

// Staged is a bundle body in a file, by the digest of its bytes.
type Staged struct {
	Path   string
	Digest string // sha256:…
}

// stagedPattern names the files save makes.
const stagedPattern = ".url-bundle-"

// removeLeft removes what a daemon stopped mid-download (killed, or its
// machine down) left staged: each up to a bundle's size, which nothing
// else would ever remove.
func (s *BundleStage) removeLeft(logger *slog.Logger) {
	left, _ := filepath.Glob(filepath.Join(s.Dir, stagedPattern+"*"))
	for _, p := range left {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("cannot remove a bundle download left staged", "file", p, "err", err)
		}
	}
}

// save writes r (of size bytes, -1 when unknown) to a new file in s.Dir,
// at most s.MaxBytes, and removes it on any failure.
func (s *BundleStage) save(r io.Reader, size int64) (*Staged, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	limit, what := s.MaxBytes, ""
	if s.Room != nil {
		room, err := s.Room()
		if err != nil {
			return nil, err
		}
		if room < limit {
			limit, what = max(room, 0), " (what the filesystem can spare above its reserve)"
		}
	}
	if size > limit {
		return nil, fmt.Errorf("body of %d bytes is larger than %d bytes%s", size, limit, what)
	}
	f, err := os.CreateTemp(s.Dir, stagedPattern)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("body larger than %d bytes%s; cut off there", limit, what)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return &Staged{Path: f.Name(), Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}
