package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/oci/bundle"
)

const bundlePod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: example.com/web:1
  - name: side
    image: example.com/side:1
`

// bundleFixture writes a signing key, an OCI archive holding the images
// refs and a manifest dir with files; it returns them.
func bundleFixture(t *testing.T, files map[string]string, refs ...string) (key, archive, dir string) {
	t.Helper()
	tmp := t.TempDir()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	key = filepath.Join(tmp, "cosign.key")
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	archive = filepath.Join(tmp, "images")
	lp, err := layout.Write(archive, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		img, _ := random.Image(256, 1)
		if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{imagespec.AnnotationRefName: ref})); err != nil {
			t.Fatal(err)
		}
	}
	dir = filepath.Join(tmp, "manifests")
	os.Mkdir(dir, 0o700)
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return key, archive, dir
}

// TestCreateBundleRefuses names what makes a bundle impossible: the file,
// pod, container and image of an image not supplied; the Secret and key of
// an inline value; a manifest's file, field and reason.
func TestCreateBundleRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files map[string]string
		refs  []string
		allow bool
		want  string
	}{
		{name: "image not supplied", files: map[string]string{"web.yaml": bundlePod}, refs: []string{"example.com/web:1"},
			want: "web.yaml: pod web container side: image example.com/side:1: no --image supplies it"},
		{name: "secret value", files: map[string]string{"web.yaml": bundlePod, "s.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2\n"},
			refs: []string{"example.com/web:1", "example.com/side:1"}, want: "Secret default/db: key password has a value written in the manifest"},
		{name: "bad manifest", files: map[string]string{"web.yaml": strings.Replace(bundlePod, "name: side", "name: Side_", 1)},
			refs: []string{"example.com/web:1", "example.com/side:1"}, want: "web.yaml: spec.containers[1].name"},
		{name: "dot-files and backups are skipped", files: map[string]string{".x.yaml": "junk", "web.yaml~": "junk"}, want: "no manifest file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, archive, dir := bundleFixture(t, tc.files, tc.refs...)
			_, err := CreateBundle(ctx, BundleCreate{Name: "edge", Key: key, Out: filepath.Join(t.TempDir(), "b.tar"),
				Images: []string{archive}, Paths: []string{dir}, AllowSecretValues: tc.allow})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCreateApplyBundle makes a bundle of a pod, a ConfigMap and a Secret of
// credential references, and applies it: the manifests are the node's.
func TestCreateApplyBundle(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{"web.yaml": bundlePod,
		"objs.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  annotations:\n    staticpodd.io/credentials: password=db-password\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: b\n"}
	key, archive, dir := bundleFixture(t, files, "example.com/web:1", "example.com/side:1")
	out := filepath.Join(t.TempDir(), "edge.tar")
	c, err := CreateBundle(ctx, BundleCreate{Name: "edge", Key: key, Out: out, Images: []string{archive}, Paths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	root := t.TempDir()
	rec, err := ApplyBundle(ctx, &config.Config{RootDir: root, ImageGCHighThresholdPercent: 100}, out, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != c.Digest || len(rec.Images) != 2 || len(rec.Manifests) != 2 || rec.Signer != "accepted" {
		t.Errorf("record %+v", rec)
	}
	st, err := ReadBundleStatus(root)
	if err != nil || st.Current == nil || st.Current.Digest != c.Digest {
		t.Fatalf("status %+v, %v", st, err)
	}
	var b strings.Builder
	st.WriteText(&b)
	if !strings.Contains(b.String(), "current: edge "+c.Digest+", accepted") {
		t.Errorf("status text:\n%s", b.String())
	}
}

// TestCheckBundle refuses, at apply, a bundle whose manifests name an image
// it does not carry, or that do not parse.
func TestCheckBundle(t *testing.T) {
	md := bundle.Metadata{Images: []bundle.ImageRef{{Ref: "example.com/web:1"}}}
	if err := CheckBundle(md, map[string][]byte{"web.yaml": []byte(bundlePod)}); err == nil ||
		!strings.Contains(err.Error(), "container side: image example.com/side:1 is not in the bundle") {
		t.Errorf("missing image: %v", err)
	}
	if err := CheckBundle(md, map[string][]byte{"web.yaml": []byte("kind: Pod\n")}); err == nil || !strings.Contains(err.Error(), "web.yaml") {
		t.Errorf("bad manifest: %v", err)
	}
}
