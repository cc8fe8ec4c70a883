//go:build controlplane

package controlplane

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// newKey makes an ECDSA P-256 key pair in dir, as `cosign generate-key-pair`
// would without a password: the private half (PKCS#8 PEM) in <name>.key, the
// public half, as policy/sign derives it, in <name>.pub. It returns both paths.
func newKey(t *testing.T, dir, name string) (priv, pub string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	priv = filepath.Join(dir, name+".key")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sign.Load(priv, nil)
	if err != nil {
		t.Fatalf("load the signing key: %v", err)
	}
	pubPEM, err := s.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	pub = filepath.Join(dir, name+".pub")
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// signedImage is an image signArchive signed.
type signedImage struct {
	Ref    string // the index entry's org.opencontainers.image.ref.name
	Digest string // its manifest digest, what the signature is over
	ID     string // its config digest, the store's image ID
	// Layer is the digest of its last layer (the component's binary), the
	// blob tamper changes.
	Layer string
}

// maxSmallBlob bounds what smallEntries keeps in memory of an archive: the
// index, manifests and configs, never a layer.
const maxSmallBlob = 1 << 20

// signArchive signs the images of the OCI archive src with the private key
// key into dst, as a build machine does (`staticpodd images sign`: cosign's
// tag-scheme signature of each manifest digest, as the image its ref name
// names, added to the layout), and returns them. With tamper, each image's
// last layer is then changed (changeLayer), the manifest left as signed.
func signArchive(t *testing.T, d *testdaemon.Daemon, src, dst, key string, tamper bool) []signedImage {
	t.Helper()
	signedTar := dst
	if tamper {
		signedTar = dst + ".signed"
		defer os.Remove(signedTar)
	}
	d.CLI("images", "sign", "--key", key, src, "-o", signedTar)
	small, err := smallEntries(signedTar)
	if err != nil {
		t.Fatal(err)
	}
	var index imagespec.Index
	if err := json.Unmarshal(small["index.json"], &index); err != nil {
		t.Fatalf("%s: index.json: %v", signedTar, err)
	}
	var signed []signedImage
	tampered := map[string]bool{}
	sigTags := map[string]bool{}
	for _, desc := range index.Manifests {
		sigTags[desc.Annotations[imagespec.AnnotationRefName]] = true
	}
	for _, desc := range index.Manifests {
		ref := desc.Annotations[imagespec.AnnotationRefName]
		tag, err := policy.SignatureTag(desc.Digest.String())
		if err != nil {
			t.Fatal(err)
		}
		if !sigTags[tag] {
			continue // a signature image, or an image left unsigned
		}
		var m imagespec.Manifest
		if err := json.Unmarshal(small[blobPath(desc.Digest.String())], &m); err != nil || len(m.Layers) == 0 {
			t.Fatalf("%s: manifest %s of %s: %v (%d layers)", signedTar, desc.Digest, ref, err, len(m.Layers))
		}
		img := signedImage{Ref: ref, Digest: desc.Digest.String(), ID: m.Config.Digest.String(),
			Layer: m.Layers[len(m.Layers)-1].Digest.String()}
		signed = append(signed, img)
		tampered[blobPath(img.Layer)] = true
	}
	if len(signed) == 0 {
		t.Fatalf("images sign signed no image of %s: index %+v", src, index.Manifests)
	}
	if tamper {
		if err := rewriteArchive(signedTar, dst, tampered); err != nil {
			t.Fatal(err)
		}
	}
	return signed
}

func blobPath(digest string) string {
	return "blobs/" + strings.Replace(digest, ":", "/", 1)
}

// smallEntries reads the regular files of the tar at path that are at most
// maxSmallBlob bytes, by name.
func smallEntries(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg || h.Size > maxSmallBlob {
			continue
		}
		if out[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
	}
}

// rewriteArchive copies the tar src to dst with each entry named in tamper
// changed (changeLayer).
func rewriteArchive(src, dst string, tamper map[string]bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		if !tamper[h.Name] {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
			continue
		}
		body, err := changeLayer(tr)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", src, h.Name, err)
		}
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}

// changeLayer reads a gzip-compressed layer and returns it compressed again
// with a byte of its content changed, in the middle of the component's
// binary: a layer that unpacks as well as the one signed, so that only its
// digest tells them apart.
func changeLayer(r io.Reader) ([]byte, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	content, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	content[len(content)/2] ^= 0xff
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(content); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// imagePolicy is the policy the control plane's images are imported under:
// sigstoreSigned by the test's key for OCI archives and for registry.k8s.io,
// whose names they have; everything else refused, docker-archives included.
func imagePolicy(pub string) string {
	signed := fmt.Sprintf(`[{"type": "sigstoreSigned", "keyPath": %q}]`, pub)
	return fmt.Sprintf(`{
  "default": [{"type": "reject"}],
  "transports": {
    "oci-archive": {"": %s},
    "docker": {"registry.k8s.io": %s}
  }
}
`, signed, signed)
}

// storeState is what a refused import must leave as it was: the store's
// images (ID, references, digest and verdict each), its index, its layers and
// the signatures it keeps.
func storeState(d *testdaemon.Daemon) string {
	d.T.Helper()
	var ls struct {
		Images []json.RawMessage `json:"images"`
	}
	out := d.CLI("images", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		d.T.Fatalf("images ls -o json: %v\n%s", err, out)
	}
	index, err := os.ReadFile(filepath.Join(d.RootDir, "images", "index.json"))
	if err != nil {
		d.T.Fatal(err)
	}
	layers, err := os.ReadDir(filepath.Join(d.RootDir, "images", "layers"))
	if err != nil {
		d.T.Fatal(err)
	}
	// The signatures images arrived with, by manifest digest.
	sigs, err := os.ReadDir(filepath.Join(d.RootDir, "images", "signatures"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.T.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d images, %d layers:", len(ls.Images), len(layers))
	for _, l := range layers {
		fmt.Fprintf(&b, " %s", l.Name())
	}
	fmt.Fprintf(&b, "\nsignatures of %d digests:", len(sigs))
	for _, s := range sigs {
		fmt.Fprintf(&b, " %s", s.Name())
	}
	fmt.Fprintf(&b, "\nimages ls:\n%s\nindex.json:\n%s\n", out, index)
	return b.String()
}

// importSigned imports the control plane's images as an operator of an
// air-gapped node would under an image policy: each OCI archive signed with
// a key made here (`staticpodd images sign`), and the policy that requires it (imagePolicyFile) given
// to the daemon and to `images import` by $STATICPODD_IMAGE_POLICY. Before
// etcd's, a copy of its archive signed by another key and one whose layer
// was changed after signing are refused, with the store as it was: its
// images, their verdicts, its index and layers. It returns what was signed,
// by component name.
func importSigned(t *testing.T, d *testdaemon.Daemon, tars []string) map[string]signedImage {
	t.Helper()
	start := time.Now()
	dir := t.TempDir()
	key, pub := newKey(t, dir, "controlplane")
	other, _ := newKey(t, dir, "other")
	policyFile := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policyFile, []byte(imagePolicy(pub)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Where the daemon and every CLI command see it, as an operator sets it.
	t.Setenv("STATICPODD_IMAGE_POLICY", policyFile)

	signed := map[string]signedImage{}
	var archives []string
	for i, c := range cluster.Components {
		archive := filepath.Join(dir, c.Name+".tar")
		imgs := signArchive(t, d, tars[i], archive, key, false)
		if len(imgs) != 1 || imgs[0].Ref != c.Image {
			t.Fatalf("%s: the OCI archive has %+v, want the one image %s", tars[i], imgs, c.Image)
		}
		signed[c.Name] = imgs[0]
		archives = append(archives, archive)
	}
	// etcd's last: the refused copies meet a store that holds verified
	// images, which they must leave alone, and nothing of etcd's, so that
	// a copy wrongly admitted would show as an image and a layer more.
	if cluster.Components[0].Name != "etcd" {
		t.Fatalf("components %+v: etcd is not first", cluster.Components)
	}
	d.CLI(append([]string{"images", "import"}, archives[1:]...)...)
	before := storeState(d)
	for _, bad := range []struct {
		name   string
		key    string
		tamper bool
	}{
		{"signed by another key", other, false},
		{"a layer changed after signing", key, true},
	} {
		archive := filepath.Join(dir, "etcd-refused.tar")
		img := signArchive(t, d, tars[0], archive, bad.key, bad.tamper)[0]
		out, err := d.CLIErr("images", "import", archive)
		if err == nil {
			t.Errorf("etcd's archive %s imported under the policy:\n%s", bad.name, out)
		} else if !refusedBySignature(out, bad.tamper, img) {
			t.Errorf("etcd's archive %s: the refusal does not say why:\n%s", bad.name, out)
		} else {
			t.Logf("etcd's archive %s refused: %s", bad.name, out)
		}
		if after := storeState(d); after != before {
			t.Errorf("etcd's archive %s refused, but the store changed:\nbefore: %s\nafter: %s", bad.name, before, after)
		}
		if err := os.Remove(archive); err != nil {
			t.Fatal(err)
		}
	}
	d.CLI("images", "import", archives[0])
	t.Logf("images signed, refused and imported under the policy in %.1fs", time.Since(start).Seconds())
	return signed
}

// refusedBySignature says whether out, the output of a refused import of
// img, says why: a signature that does not verify with the policy's key is
// SignatureValidationFailed, and a layer changed after signing names the
// blob that does not match its digest.
func refusedBySignature(out string, tamper bool, img signedImage) bool {
	if tamper {
		return strings.Contains(out, img.Layer)
	}
	return strings.Contains(out, policy.ErrSignatureValidationFailed.Error()+": ") && strings.Contains(out, "not signed by key controlplane.pub")
}

// checkVerified checks that each pod runs the image its signature verified:
// the container's imageID is the signed manifest's repository digest, or
// its config's digest (the image ID, all an imported image has), and the
// store has that image as arrived by the signed manifest, verified by the
// test's key. The busybox image testdaemon imported before there was a
// policy is checked against it too: a docker-archive, refused.
func (cp *controlPlane) checkVerified(local map[string]corev1.Pod) {
	t := cp.t
	t.Helper()
	var ls struct {
		Images []struct {
			ID           string          `json:"id"`
			RepoTags     []string        `json:"repoTags"`
			Digest       string          `json:"digest"`
			Verification *policy.Verdict `json:"verification"`
		} `json:"images"`
	}
	out := cp.d.CLI("images", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatalf("images ls -o json: %v\n%s", err, out)
	}
	for _, c := range cluster.Components {
		img := cp.signed[c.Name]
		repo := strings.SplitN(c.Image, ":", 2)[0]
		for _, cs := range local[c.Name].Status.ContainerStatuses {
			if cs.ImageID != repo+"@"+img.Digest && cs.ImageID != img.ID {
				t.Errorf("%s: container %s runs image %s, want the signed %s@%s (config %s)", c.Name, cs.Name, cs.ImageID, repo, img.Digest, img.ID)
			}
			t.Logf("%s: container %s runs %s, of the manifest %s signed", c.Name, cs.Name, cs.ImageID, img.Digest)
		}
		found := false
		for _, i := range ls.Images {
			if i.ID != img.ID {
				continue
			}
			found = true
			if i.Digest != img.Digest || i.Verification == nil || i.Verification.Decision != policy.Verified ||
				!strings.Contains(i.Verification.By, "controlplane.pub") {
				t.Errorf("%s: the store has image %s arrived by %s, verification %+v; want %s verified by controlplane.pub", c.Name, i.ID, i.Digest, i.Verification, img.Digest)
			}
		}
		if !found {
			t.Errorf("%s: no image %s in the store:\n%s", c.Name, img.ID, out)
		}
	}
	for _, i := range ls.Images {
		if slices.Contains(i.RepoTags, "docker.io/library/busybox:latest") &&
			(i.Verification == nil || i.Verification.Decision != policy.Rejected) {
			t.Errorf("busybox, imported before the policy, has verification %+v, want rejected", i.Verification)
		}
	}
}
