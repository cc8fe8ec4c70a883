package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/staticpodd/staticpodd/rootfs/busybox"
)

// epoch is every timestamp in the image, so builds are reproducible.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type options struct {
	busybox          string
	refs             []string
	format, compress string
	entrypoint, cmd  []string
	env              []string
	stopSignal       string
	files            []file
	out              string
	// pad adds a second layer holding /pad, this many bytes that do not
	// compress (derived from the first ref, so builds repeat): an image
	// whose removal frees space, for reclaim tests.
	pad int64
}

// file is a host file that -add puts into the image.
type file struct {
	src string // on the host
	dst string // in the image, relative: "usr/local/bin/etcd"
}

// parseAdds reads -add values, SRC:DST with DST absolute and clean. A DST that
// is the root, or that goes through ".." anywhere, is refused: the layer names
// only what it says.
func parseAdds(adds []string) ([]file, error) {
	var files []file
	for _, a := range adds {
		src, dst, ok := strings.Cut(a, ":")
		if !ok || src == "" || dst == "" {
			return nil, fmt.Errorf("-add %q: want SRC:DST", a)
		}
		if !path.IsAbs(dst) || path.Clean(dst) != dst || dst == "/" {
			return nil, fmt.Errorf("-add %q: DST must be a clean absolute file path", a)
		}
		files = append(files, file{src: src, dst: strings.TrimPrefix(dst, "/")})
	}
	return files, nil
}

// parseList reads a JSON array (["a","b"]) or a comma list (a,b). "" is nil.
func parseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if strings.HasPrefix(s, "[") {
		var l []string
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			return nil, fmt.Errorf("parse %q as a JSON array: %w", s, err)
		}
		return l, nil
	}
	return strings.Split(s, ","), nil
}

func build(o options) error {
	bin, err := os.ReadFile(o.busybox)
	if err != nil {
		return fmt.Errorf("read busybox (apt-get install busybox-static): %w", err)
	}
	layerTar, err := rootfsTar(bin, busybox.Applets(o.busybox), o.files)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("make image: %w", err)
	}
	if o.pad > 0 {
		padTar, err := padLayer(o.pad, o.refs[0])
		if err != nil {
			return err
		}
		pl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(padTar)), nil
		})
		if err != nil {
			return fmt.Errorf("make pad layer: %w", err)
		}
		if img, err = mutate.AppendLayers(img, pl); err != nil {
			return fmt.Errorf("make image: %w", err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("make image: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.Env = o.entrypoint, o.cmd, o.env
	cfg.Config.StopSignal = o.stopSignal
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return fmt.Errorf("make image: %w", err)
	}
	return write(o, img)
}

// rootfsTar is the one layer: busybox, its applet links, users, /tmp and /www,
// and the files -add names, with the directories above them.
func rootfsTar(bin []byte, applets []string, files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(hdr *tar.Header, body []byte) error {
		hdr.ModTime, hdr.Format, hdr.Size = epoch, tar.FormatPAX, int64(len(body))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	dir := func(name string, mode int64) error {
		return add(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode}, nil)
	}
	entry := func(e busybox.Entry) error {
		name := e.Name
		if e.Type == tar.TypeDir {
			name += "/"
		}
		return add(&tar.Header{Name: name, Typeflag: e.Type, Mode: e.Mode, Linkname: e.Link}, e.Body)
	}
	dirs := map[string]bool{}
	var errs []error
	for _, e := range busybox.Base(bin) {
		errs = append(errs, entry(e))
		if e.Type == tar.TypeDir {
			dirs[e.Name] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	for _, f := range files {
		if dirs[f.dst] {
			return nil, fmt.Errorf("-add %s: /%s is a directory of the image", f.src, f.dst)
		}
		var parents []string
		for d := path.Dir(f.dst); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for _, d := range slices.Backward(parents) {
			if err := dir(d, 0o755); err != nil {
				return nil, fmt.Errorf("make layer: %w", err)
			}
			dirs[d] = true
		}
		body, err := os.ReadFile(f.src)
		if err != nil {
			return nil, fmt.Errorf("-add %s: %w", f.src, err)
		}
		fi, err := os.Stat(f.src)
		if err != nil {
			return nil, fmt.Errorf("-add %s: %w", f.src, err)
		}
		if err := add(&tar.Header{Name: f.dst, Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm())}, body); err != nil {
			return nil, fmt.Errorf("make layer: %w", err)
		}
	}
	for _, l := range busybox.Links(applets) {
		if err := entry(l); err != nil {
			return nil, fmt.Errorf("make layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	return buf.Bytes(), nil
}

// padLayer is a layer with /pad: n bytes of a ChaCha8 stream seeded by seed.
func padLayer(n int64, seed string) ([]byte, error) {
	var key [32]byte
	copy(key[:], seed)
	body := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(body)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "pad", Typeflag: tar.TypeReg, Mode: 0o644, Size: n, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// write puts img into o.out in o.format, compressed as o.compress; the file appears
// complete or not at all.
func write(o options, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(o.out), "."+filepath.Base(o.out)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var w io.WriteCloser
	switch o.compress {
	case "none":
		w = nopCloser{tmp}
	case "gzip":
		w = gzip.NewWriter(tmp)
	case "zstd":
		if w, err = zstd.NewWriter(tmp); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown -compress %q (none, gzip, zstd)", o.compress)
	}
	switch o.format {
	case "docker":
		err = writeDocker(w, o.refs, img)
	case "oci":
		err = writeOCI(w, o.refs, img)
	default:
		err = fmt.Errorf("unknown -format %q (docker, oci)", o.format)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), o.out)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	return nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func writeDocker(w io.Writer, refs []string, img v1.Image) error {
	m := map[name.Reference]v1.Image{}
	for _, r := range refs {
		tag, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("-ref %q: %w", r, err)
		}
		m[tag] = img
	}
	return tarball.MultiRefWrite(m, w)
}

// writeOCI writes an OCI archive: an OCI layout, one index entry per reference, in a
// tar with fixed owners and times.
func writeOCI(w io.Writer, refs []string, img v1.Image) error {
	dir, err := os.MkdirTemp("", "mkimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, r := range refs {
		ref, err := name.ParseReference(r)
		if err != nil {
			return fmt.Errorf("-ref %q: %w", r, err)
		}
		full := strings.Replace(ref.Name(), name.DefaultRegistry+"/", "docker.io/", 1)
		ann := map[string]string{"org.opencontainers.image.ref.name": full, "io.containerd.image.name": full}
		if err := lp.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
			return err
		}
	}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch})
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: epoch, Size: int64(len(body))}); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
