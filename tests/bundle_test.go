package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

// writeKey writes a new P-256 private key (PKCS#8 PEM) and its public key
// into dir as name.key and name.pub, and returns their paths and the signer
// of the private key.
func writeKey(t *testing.T, dir, name string) (priv, pub string, s *sign.Signer) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err = sign.Load(priv, nil); err != nil {
		t.Fatal(err)
	}
	pubPEM, err := s.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub, s
}

// The build machine's steps and the node's, through the CLI: images sign
// an OCI archive, bundle create packs it with a manifest, bundle apply
// verifies it under a policy requiring the key and pins its image; a bundle
// signed by another key is refused with the store and the bundle state as
// they were.
func TestBundleCLI(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := t.TempDir()
	key, pub, _ := writeKey(t, dir, "cosign")
	otherKey, _, _ := writeKey(t, dir, "other")
	archive := filepath.Join(dir, "bundled.tar")
	buildImage(t, archive, "-ref", "example.com/bundled:v1", "-format", "oci")
	out := d.CLI("images", "sign", "--key", key, archive)
	if !strings.HasPrefix(out, "signed example.com/bundled:v1@sha256:") {
		t.Fatalf("images sign: %s", out)
	}
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bundled\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: example.com/bundled:v1\n    command: [sleep, '3600']\n"
	if err := os.WriteFile(filepath.Join(manifests, "bundled.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, fmt.Appendf(nil, `{"default":[{"type":"reject"}],"transports":{"oci-archive":{"":[{"type":"sigstoreSigned","keyPath":%q}]}}}`, pub), 0o644); err != nil {
		t.Fatal(err)
	}

	good, bad := filepath.Join(dir, "good.tar"), filepath.Join(dir, "bad.tar")
	d.CLI("bundle", "create", "--name", "e2e", "--key", key, "-o", good, "--image", archive, manifests)
	d.CLI("bundle", "create", "--name", "e2e", "--key", otherKey, "-o", bad, "--image", archive, manifests)

	// The node: the daemon runs under the same policy, with no registry
	// it could reach; the bundle is all it gets.
	d.Args = append(d.Args, "--image-policy", policy)
	d.Start()
	out = d.CLI("bundle", "apply", "--image-policy", policy, "--rollback-after", "2m", good)
	if !strings.Contains(out, "(verified by key cosign.pub)") || !strings.Contains(out, "image example.com/bundled:v1@sha256:") {
		t.Fatalf("bundle apply: %s", out)
	}
	type bundleStatus struct {
		Current struct {
			Digest string `json:"digest"`
			Images []struct {
				Digest string `json:"digest"`
				ID     string `json:"id"`
			} `json:"images"`
		} `json:"current"`
	}
	var st bundleStatus
	status := d.CLI("bundle", "status", "-o", "json")
	if err := json.Unmarshal([]byte(status), &st); err != nil || st.Current.Digest == "" || len(st.Current.Images) != 1 {
		t.Fatalf("bundle status: %v\n%s", err, status)
	}
	first := st.Current.Digest
	ls := d.CLI("images", "ls")
	if !strings.Contains(ls, "example.com/bundled:v1") || !strings.Contains(ls, "pinned") || !strings.Contains(ls, "verified by key cosign.pub") {
		t.Errorf("images ls after apply:\n%s", ls)
	}

	// Its pod runs the verified image, and the bundle is kept once Ready.
	firstPod := d.WaitRunning("bundled", 60*time.Second)
	if id := firstPod.Status.ContainerStatuses[0].ImageID; id != st.Current.Images[0].ID && !strings.HasSuffix(id, "@"+st.Current.Images[0].Digest) {
		t.Errorf("the pod runs image %s, not the bundle's verified %+v", id, st.Current.Images[0])
	}
	d.Eventually(60*time.Second, "the first bundle kept once Ready", func() error {
		if s := d.CLI("bundle", "status"); strings.Contains(s, "trial") {
			return fmt.Errorf("%s", s)
		}
		return nil
	})

	// A second bundle replaces the first: its pod comes, the first's goes.
	pod2 := strings.Replace(pod, "name: bundled", "name: second", 1)
	if err := os.Remove(filepath.Join(manifests, "bundled.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "second.yaml"), []byte(pod2), 0o644); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(dir, "second.tar")
	d.CLI("bundle", "create", "--name", "e2e", "--key", key, "-o", second, "--image", archive, manifests)
	d.CLI("bundle", "apply", "--image-policy", policy, second)
	running := d.WaitRunning("second", 60*time.Second)
	d.Eventually(60*time.Second, "the first bundle's pod gone", func() error {
		if p := d.Pod("bundled"); p != nil {
			return fmt.Errorf("bundled is still %s", p.Status.Phase)
		}
		return nil
	})
	status = d.CLI("bundle", "status", "-o", "json")
	if err := json.Unmarshal([]byte(status), &st); err != nil || st.Current.Digest == first {
		t.Fatalf("bundle status after the second: %v\n%s", err, status)
	}
	ls = d.CLI("images", "ls")

	// A bundle signed by another key is refused whole: store, state and
	// the running pod as they were.
	out, err := d.CLIErr("bundle", "apply", "--image-policy", policy, bad)
	if err == nil || !strings.Contains(out, "SignatureValidationFailed") {
		t.Fatalf("bundle apply of another key's bundle: %v\n%s", err, out)
	}
	if after := d.CLI("images", "ls"); after != ls {
		t.Errorf("refused, but images ls changed:\n%s\nwas\n%s", after, ls)
	}
	if after := d.CLI("bundle", "status", "-o", "json"); after != status {
		t.Errorf("refused, but bundle status changed:\n%s\nwas\n%s", after, status)
	}
	if p := d.Pod("second"); p == nil || p.UID != running.UID || p.Status.Phase != "Running" {
		t.Errorf("refused, but the running pod changed: %+v", p)
	}
}
