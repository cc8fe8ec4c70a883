package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// benchLayers is a ~100 MiB image in 4 layers: 24 MiB of incompressible bytes
// in 96 files each, plus 1 MiB of text, gzip-compressed as registries serve them.
func benchLayers(b *testing.B) [][]byte {
	b.Helper()
	rng := rand.NewChaCha8([32]byte{1})
	var layers [][]byte
	for l := range 4 {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		add := func(name string, body []byte) {
			hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: fixtureTime}
			if err := tw.WriteHeader(hdr); err != nil {
				b.Fatal(err)
			}
			tw.Write(body)
		}
		for f := range 96 {
			body := make([]byte, 256<<10)
			rng.Read(body)
			add(fmt.Sprintf("l%d/bin/f%d", l, f), body)
		}
		add(fmt.Sprintf("l%d/etc/text", l), bytes.Repeat([]byte("staticpodd pull benchmark\n"), 40000))
		tw.Close()
		layers = append(layers, buf.Bytes())
	}
	return layers
}

// BenchmarkPull pulls a ~100 MiB 4-layer image from a registry on 127.0.0.1
// into an empty store, imports the same image from a docker-archive, and, as
// peers, copies it with skopeo into an OCI layout, pulls it with podman into
// a storage of its own, and extracts its layers with tar -x. make bench-pull.
func BenchmarkPull(b *testing.B) {
	testroot.Require(b)
	raw := benchLayers(b)
	img := empty.Image
	var total int64
	for _, l := range raw {
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(l)), nil })
		if err != nil {
			b.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			b.Fatal(err)
		}
		total += int64(len(l))
	}
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	img, _ = mutate.ConfigFile(img, cfg)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dst, _ := name.ParseReference(host+"/bench/app:v1", name.Insecure)
	if err := remote.Write(dst, img); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	hosts := filepath.Join(dir, "certs.d")
	if err := os.MkdirAll(filepath.Join(hosts, host), 0o755); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(hosts, host, "hosts.toml"), fmt.Appendf(nil, "server = %q\n", srv.URL), 0o644)
	archive := filepath.Join(dir, "app.tar")
	tag, _ := name.NewTag("bench/app:v1")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		b.Fatal(err)
	}

	fresh := func(b *testing.B, i int) *Store {
		s, err := Open(filepath.Join(dir, "stores", fmt.Sprint(b.Name(), i)), discardLogger())
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	clean := func() { os.RemoveAll(filepath.Join(dir, "stores")); os.RemoveAll(filepath.Join(dir, "peer")) }
	b.Run("pull", func(b *testing.B) {
		b.SetBytes(total)
		for i := range b.N {
			s := fresh(b, i)
			if _, err := NewPuller(s, PullConfig{HostsDir: hosts, Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}, discardLogger()).Pull(b.Context(), host+"/bench/app:v1", nil); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			clean()
			b.StartTimer()
		}
	})
	b.Run("import", func(b *testing.B) {
		b.SetBytes(total)
		for i := range b.N {
			if _, err := fresh(b, i).Import(b.Context(), archive); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			clean()
			b.StartTimer()
		}
	})
	peer := func(sub string, cmd func(out string) *exec.Cmd) {
		b.Run(sub, func(b *testing.B) {
			b.SetBytes(total)
			for range b.N {
				out := filepath.Join(dir, "peer")
				if o, err := cmd(out).CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", sub, err, o)
				}
				b.StopTimer()
				clean()
				b.StartTimer()
			}
		})
	}
	if _, err := exec.LookPath("skopeo"); err == nil {
		peer("skopeo-copy", func(out string) *exec.Cmd {
			return exec.Command("skopeo", "copy", "--src-tls-verify=false", "docker://"+host+"/bench/app:v1", "oci:"+out+":v1")
		})
	} else {
		b.Log("skopeo not installed: no skopeo row")
	}
	if _, err := exec.LookPath("podman"); err == nil {
		peer("podman-pull", func(out string) *exec.Cmd {
			return exec.Command("podman", "--root", out+"/root", "--runroot", out+"/run", "--storage-driver", "overlay",
				"pull", "-q", "--tls-verify=false", host+"/bench/app:v1")
		})
		peer("podman-load", func(out string) *exec.Cmd {
			return exec.Command("podman", "--root", out+"/root", "--runroot", out+"/run", "--storage-driver", "overlay",
				"load", "-q", "-i", archive)
		})
	} else {
		b.Log("podman not installed: no podman rows")
	}
	// Unpacking alone: tar -x of the uncompressed layers, against the store's unpack.
	var plain [][]byte
	var plainTotal int64
	ls, err := img.Layers()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range ls {
		rc, _ := l.Uncompressed()
		p, _ := io.ReadAll(rc)
		plain = append(plain, p)
		plainTotal += int64(len(p))
	}
	b.Run("unpack", func(b *testing.B) {
		b.SetBytes(plainTotal)
		for i := range b.N {
			for j, p := range plain {
				d := filepath.Join(dir, "peer", fmt.Sprint(i, j))
				os.MkdirAll(d, 0o755)
				if _, _, err := unpack(b.Context(), bytes.NewReader(p), d, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			clean()
			b.StartTimer()
		}
	})
	b.Run("tar-x", func(b *testing.B) {
		b.SetBytes(plainTotal)
		for i := range b.N {
			for j, p := range plain {
				d := filepath.Join(dir, "peer", fmt.Sprint(i, j))
				os.MkdirAll(d, 0o755)
				cmd := exec.Command("tar", "-x", "-C", d)
				cmd.Stdin = bytes.NewReader(p)
				if o, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("tar -x: %v\n%s", err, o)
				}
			}
			b.StopTimer()
			clean()
			b.StartTimer()
		}
	})
}
