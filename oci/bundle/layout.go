package bundle

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// extract unpacks the OCI layout in the tar (plain or gzip) read from r into
// dir, which must exist. It takes only what a layout is made of (oci-layout,
// index.json, blobs/sha256/<hex>, regular files and their dirs), so no name
// in the tar reaches outside dir or anywhere but there; it hashes each blob
// as it writes it and refuses one whose content is not its name; and it
// stops at max bytes written and MaxBlobs blobs. Other entries are an error,
// or, with skipOthers, left out (a docker-archive's beside the layout).
func extract(ctx context.Context, r io.Reader, dir string, max int64, skipOthers bool) error {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("read gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	left := max
	for entries := 0; ; entries++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Every entry counts, those skipped too: a stream of them is no
		// less endless for writing nothing.
		if entries > MaxBlobs+16 {
			return fmt.Errorf("more than %d tar entries", MaxBlobs+16)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		switch {
		case hdr.Typeflag == tar.TypeDir && (name == "." || name == "blobs" || name == "blobs/sha256"):
			continue
		case skipOthers && !layoutName(name):
			continue
		case hdr.Typeflag != tar.TypeReg:
			return fmt.Errorf("tar entry %q: not a regular file of an OCI layout", trunc(hdr.Name))
		case seen[name]:
			return fmt.Errorf("tar entry %q: twice", trunc(hdr.Name))
		}
		var want string
		switch name {
		case "oci-layout", "index.json":
			if hdr.Size > MaxJSONBytes {
				return fmt.Errorf("tar entry %s: %d bytes: at most %d", name, hdr.Size, MaxJSONBytes)
			}
		default:
			h, ok := strings.CutPrefix(name, "blobs/sha256/")
			if !ok || !validHex(h) {
				return fmt.Errorf("tar entry %q: not part of an OCI layout (oci-layout, index.json, blobs/sha256/<hex>)", trunc(hdr.Name))
			}
			want = h
		}
		seen[name] = true
		if len(seen) > MaxBlobs+2 {
			return fmt.Errorf("more than %d blobs", MaxBlobs)
		}
		if hdr.Size > left {
			return fmt.Errorf("tar entry %s: more than %d bytes in all (the bundle's bound, or what its filesystem has free above the image store's reserve)", name, max)
		}
		left -= hdr.Size
		if err := writeBlob(filepath.Join(dir, filepath.FromSlash(name)), io.LimitReader(tr, hdr.Size), want); err != nil {
			return fmt.Errorf("tar entry %s: %w", name, err)
		}
	}
	if !seen["index.json"] {
		return errors.New("not an OCI layout: no index.json")
	}
	return nil
}

func layoutName(name string) bool {
	h, ok := strings.CutPrefix(name, "blobs/sha256/")
	return name == "oci-layout" || name == "index.json" || ok && validHex(h)
}

// writeBlob writes r to the new file p; when want is not "", r's sha256
// must be it.
func writeBlob(p string, r io.Reader, want string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(f, io.TeeReader(r, h))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && want != "" && hex.EncodeToString(h.Sum(nil)) != want {
		err = fmt.Errorf("content has digest sha256:%s, not the one that names it: tampered or corrupt", hex.EncodeToString(h.Sum(nil)))
	}
	if err != nil {
		os.Remove(p)
	}
	return err
}

// readBlob reads the blob digest of the layout in dir, at most max bytes.
func readBlob(dir, digest string, max int64) ([]byte, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("digest %q is not sha256:<hex>", trunc(digest))
	}
	f, err := os.Open(filepath.Join(dir, "blobs", "sha256", Hex(digest)))
	if err != nil {
		return nil, fmt.Errorf("blob %s: not in the bundle", digest)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", digest, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("blob %s: more than %d bytes", digest, max)
	}
	return b, nil
}
