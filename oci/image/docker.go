package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// maxJSON bounds what is read into memory from a docker-archive's manifest.json
// or an image config.
const maxJSON = 32 << 20

// tarIndex is where each entry of a tar file is, by cleaned name, so that one
// entry can be read without reading the tar from its start.
type tarIndex struct {
	path    string
	entries map[string]tarEntry
}

type tarEntry struct {
	hdr    *tar.Header
	offset int64 // of the entry's data in the file
}

// readTarIndex reads every header of the tar at p (so a truncated tar fails here).
func readTarIndex(p string) (tarIndex, error) {
	f, err := os.Open(p)
	if err != nil {
		return tarIndex{}, err
	}
	defer f.Close()
	idx := tarIndex{path: p, entries: map[string]tarEntry{}}
	// tar.Reader reads headers block by block from f, and seeks over data: f's
	// offset after Next is where the entry's data starts.
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tarIndex{}, fmt.Errorf("read tar: %w", truncated(err))
		}
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return tarIndex{}, fmt.Errorf("read tar: %w", err)
		}
		idx.entries[cleanTarName(hdr.Name)] = tarEntry{hdr: hdr, offset: off}
	}
	if len(idx.entries) == 0 {
		return tarIndex{}, errors.New("read tar: empty or not a tar")
	}
	return idx, nil
}

func cleanTarName(name string) string {
	return path.Clean(strings.TrimLeft(strings.TrimPrefix(name, "./"), "/"))
}

func (t tarIndex) has(name string) bool {
	_, ok := t.entries[name]
	return ok
}

// open returns the data of the regular file name, following symlinks and hard
// links inside the tar (docker save makes <id>/layer.tar a link to a blob).
func (t tarIndex) open(name string) (io.ReadCloser, int64, error) {
	name = cleanTarName(name)
	for range 16 {
		e, ok := t.entries[name]
		if !ok {
			return nil, 0, fmt.Errorf("%s: not in the archive", name)
		}
		switch e.hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			f, err := os.Open(t.path)
			if err != nil {
				return nil, 0, err
			}
			return struct {
				io.Reader
				io.Closer
			}{io.NewSectionReader(f, e.offset, e.hdr.Size), f}, e.hdr.Size, nil
		case tar.TypeSymlink:
			name = cleanTarName(path.Join(path.Dir(name), e.hdr.Linkname))
		case tar.TypeLink:
			name = cleanTarName(e.hdr.Linkname)
		default:
			return nil, 0, fmt.Errorf("%s: tar entry of type %q, not a file", name, e.hdr.Typeflag)
		}
	}
	return nil, 0, fmt.Errorf("%s: too many links", name)
}

// readJSON reads the small file name and decodes it into v; it returns the bytes.
func (t tarIndex) readJSON(name string, v any) ([]byte, error) {
	rc, size, err := t.open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if size > maxJSON {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit", name, size, maxJSON)
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return b, nil
}

// dockerImages lists the images of a docker-archive (`docker save`), with their
// RepoTags. Each layer's compression (none, gzip or zstd) is told by its own
// magic bytes: archives mixing them are common (tools recompress some layers).
func dockerImages(t tarIndex) ([]source, error) {
	var m tarball.Manifest
	if _, err := t.readJSON("manifest.json", &m); err != nil {
		return nil, fmt.Errorf("read docker-archive manifest: %w", err)
	}
	var srcs []source
	for i, desc := range m {
		src, err := dockerImage(t, desc)
		if err != nil {
			return nil, fmt.Errorf("docker-archive manifest.json image %d: %w", i, err)
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

func dockerImage(t tarIndex, desc tarball.Descriptor) (source, error) {
	var refs []string
	for i, rt := range desc.RepoTags {
		norm, err := Normalize(rt)
		if err != nil {
			return source{}, fmt.Errorf("RepoTags[%d]: %w", i, err)
		}
		// A docker-archive has no manifest digest to name: a name by
		// digest would give its image one it is not, and a pod pinned
		// to that digest would run it.
		if strings.Contains(norm, "@") {
			return source{}, fmt.Errorf("RepoTags[%d]: %s names a digest; a docker-archive's image has none", i, bound(norm))
		}
		refs = append(refs, norm)
	}
	var cfg v1.ConfigFile
	raw, err := t.readJSON(desc.Config, &cfg)
	if err != nil {
		return source{}, fmt.Errorf("config: %w", err)
	}
	if err := verifyConfigName(raw, desc.Config); err != nil {
		return source{}, err
	}
	if len(cfg.RootFS.DiffIDs) != len(desc.Layers) {
		return source{}, fmt.Errorf("%d layers, but config %s has %d diff IDs", len(desc.Layers), desc.Config, len(cfg.RootFS.DiffIDs))
	}
	files := map[v1.Hash]string{}
	for i, d := range cfg.RootFS.DiffIDs {
		if _, ok := files[d]; !ok {
			files[d] = desc.Layers[i]
		}
	}
	// A docker-archive has no manifest digest, so nothing a signature
	// could be over: a policy requiring one refuses it.
	adm := admitted{img: policy.Image{Transport: policy.TransportDockerArchive}}
	if len(refs) > 0 {
		adm.img.Reference = refs[0]
	}
	return source{
		refs:     refs,
		admitted: adm,
		config:   func() ([]byte, error) { return raw, nil },
		layer: func(d v1.Hash) (io.ReadCloser, error) {
			file, ok := files[d]
			if !ok {
				return nil, fmt.Errorf("no layer with diff ID %s", d)
			}
			rc, _, err := t.open(file)
			if err != nil {
				return nil, err
			}
			return uncompressed(rc, file)
		},
	}, nil
}

// verifyConfigName checks a docker-archive config against its file name, which
// `docker save` and skopeo make its digest (<hex>.json or blobs/sha256/<hex>).
func verifyConfigName(raw []byte, file string) error {
	base := strings.TrimSuffix(path.Base(file), ".json")
	if _, err := v1.NewHash("sha256:" + base); err != nil {
		return nil // not named by digest: nothing to check against
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != base {
		return fmt.Errorf("config %s: content has digest sha256:%s: corrupt archive", file, got)
	}
	return nil
}
