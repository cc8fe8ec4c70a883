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
)

// writeKey writes a new P-256 private key (PKCS#8 PEM) and its public key
// into dir as name.key and name.pub.
func writeKey(t *testing.T, dir, name string) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pder, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, pub = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
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
	key, pub := writeKey(t, dir, "cosign")
	otherKey, _ := writeKey(t, dir, "other")
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
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: bundled}\nspec:\n  containers:\n  - name: main\n    image: example.com/bundled:v1\n    command: [sleep, '3600']\n"
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

	out = d.CLI("bundle", "apply", "--image-policy", policy, good)
	if !strings.Contains(out, "(verified by key cosign.pub)") || !strings.Contains(out, "image example.com/bundled:v1@sha256:") {
		t.Fatalf("bundle apply: %s", out)
	}
	var st struct {
		Current struct {
			Digest string `json:"digest"`
			Images []struct {
				Digest string `json:"digest"`
			} `json:"images"`
		} `json:"current"`
	}
	status := d.CLI("bundle", "status", "-o", "json")
	if err := json.Unmarshal([]byte(status), &st); err != nil || st.Current.Digest == "" || len(st.Current.Images) != 1 {
		t.Fatalf("bundle status: %v\n%s", err, status)
	}
	ls := d.CLI("images", "ls")
	if !strings.Contains(ls, "example.com/bundled:v1") || !strings.Contains(ls, "pinned") {
		t.Errorf("images ls after apply:\n%s", ls)
	}

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
}
