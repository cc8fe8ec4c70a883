package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// Under an image policy (--image-policy) that requires a key for a
// registry (cosign's repository identity, matchRepository), a pod whose
// image there is unsigned waits SignatureValidationFailed with the
// kubelet's message and an event, and nothing of the image enters the
// store; a pod whose image is signed (cosign's tag scheme) runs, and its
// status shows the digest that was verified; a tag moved to an unsigned
// image after it was verified is refused at its next pull.
func TestPullSignaturePolicy(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	signedTar, unsignedTar := filepath.Join(d.Dir, "signed.tar"), filepath.Join(d.Dir, "unsigned.tar")
	buildImage(t, signedTar, "-ref", "signed:v1", "-cmd", loopCmd("signed"))
	buildImage(t, unsignedTar, "-ref", "unsigned:v1", "-cmd", loopCmd("unsigned"))
	signedID, signedRef := r.push(signedTar, "team/signed:v1")
	r.push(signedTar, "team/signed:latest")
	unsignedID, _ := r.push(unsignedTar, "team/unsigned:v1")

	_, pub, signer := writeKey(t, d.Dir, "cosign")
	_, digest, _ := strings.Cut(signedRef, "@")
	sig, err := signer.Cosign(r.addr+"/team/signed", digest)
	if err != nil {
		t.Fatal(err)
	}
	sigImg, err := policy.SignatureImage([]policy.Signature{sig})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := policy.SignatureTag(digest)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := name.ParseReference(r.addr+"/team/signed:"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, sigImg); err != nil {
		t.Fatal(err)
	}

	policyFile := filepath.Join(d.Dir, "policy.json")
	doc := fmt.Sprintf(`{"default": [{"type": "insecureAcceptAnything"}],
 "transports": {"docker": {%q: [{"type": "sigstoreSigned", "keyPath": %q, "signedIdentity": {"type": "matchRepository"}}]}}}`,
		r.addr, pub)
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--image-policy", policyFile)

	d.Start()
	unsigned := r.addr + "/team/unsigned:v1"
	d.WriteManifest("unsigned.yaml", appPod("unsigned", unsigned))
	d.WriteManifest("signed.yaml", appPod("signed", r.addr+"/team/signed:v1"))
	moving := r.addr + "/team/signed:latest"
	d.WriteManifest("moving.yaml", appPod("moving", moving))
	want := "image pull failed for " + unsigned + " because the signature validation failed: "
	d.Eventually(60*time.Second, "the unsigned image refused", func() error {
		w := statusOf(d.Pod("unsigned")).State.Waiting
		switch {
		case w == nil:
			return errors.New("not waiting")
		case w.Reason == "SignatureValidationFailed" && strings.HasPrefix(w.Message, want):
			return nil
		default:
			return fmt.Errorf("waiting %s: %s", w.Reason, w.Message)
		}
	})
	pod := d.WaitRunning("signed", 60*time.Second)
	if cs := statusOf(pod); cs.ImageID != signedRef {
		t.Errorf("signed pod's imageID %s, want the verified %s", cs.ImageID, signedRef)
	}
	d.WaitRunning("moving", 60*time.Second)

	// The tag moves to the unsigned image: the restart of the container
	// that ran the verified one pulls again under Always (:latest) and is
	// refused; the tag still names the verified image in the store, and the
	// other pod of that image is not touched.
	r.push(unsignedTar, "team/signed:latest")
	d.CLIErr("exec", "moving", "-c", "main", "--", "kill", "1")
	wantMoved := "image pull failed for " + moving + " because the signature validation failed: "
	d.Eventually(60*time.Second, "the moved tag refused", func() error {
		cs := statusOf(d.Pod("moving"))
		w := cs.State.Waiting
		switch {
		case cs.RestartCount == 0 && cs.State.Running != nil:
			return errors.New("not restarted yet")
		case w == nil:
			return fmt.Errorf("state %+v", cs.State)
		case w.Reason == "SignatureValidationFailed" && strings.HasPrefix(w.Message, wantMoved),
			w.Reason == "ImagePullBackOff" && strings.Contains(w.Message, "SignatureValidationFailed: "+wantMoved):
			return nil
		default:
			return fmt.Errorf("waiting %s: %s", w.Reason, w.Message)
		}
	})
	var ls struct {
		Images []struct {
			ID       string   `json:"id"`
			RepoTags []string `json:"repoTags"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(d.CLI("images", "ls", "-o", "json")), &ls); err != nil {
		t.Fatal(err)
	}
	named := "nothing"
	for _, img := range ls.Images {
		if slices.Contains(img.RepoTags, moving) {
			named = img.ID
		}
	}
	if named != signedID {
		t.Errorf("%s names %s in the store, not the verified %s", moving, named, signedID)
	}
	if after := statusOf(d.Pod("signed")); after.ContainerID != statusOf(pod).ContainerID || after.RestartCount != 0 {
		t.Errorf("the other pod of the verified image was touched: %+v", after)
	}
	// The kubelet's event carries the runtime's error as it is.
	if out := d.CLI("events"); !strings.Contains(out, fmt.Sprintf("Failed to pull image %q: SignatureValidationFailed: ", unsigned)) {
		t.Errorf("no Failed event for the refused image:\n%s", out)
	}
	if out := d.CLI("images", "ls", "-o", "json"); strings.Contains(out, "team/unsigned") || strings.Contains(out, unsignedID) {
		t.Errorf("the refused image is in the store:\n%s", out)
	}
	index, err := os.ReadFile(filepath.Join(d.RootDir, "images", "index.json"))
	if err != nil || strings.Contains(string(index), unsignedID) || strings.Contains(string(index), "team/unsigned") {
		t.Errorf("the refused image is in the store's index (%v):\n%s", err, index)
	}
}

// `staticpodd images pull` under --image-policy, from Docker's own registry
// (distribution, which has no referrers API: a bundle is found through the
// referrers tag) over TLS with basic auth: the signatures are read with the
// pull's CA and credentials; the policy's scopes by repository decide. A
// cosign signature of the repository and a sigstore bundle verify, an
// unsigned image is refused with the store unchanged.
func TestPullSignaturePolicyDistribution(t *testing.T) {
	t.Parallel()
	bin := registryBin(t)
	d := newDaemon(t)
	r := startDistRegistry(t, bin)
	base, err := tarball.ImageFromPath(testdaemon.Image, nil)
	if err != nil {
		t.Fatal(err)
	}
	image := func(repo string) (v1.Image, string) {
		img, err := mutate.AppendLayers(base, fileLayer(t, map[string][]byte{"repo": []byte(repo)}))
		if err != nil {
			t.Fatal(err)
		}
		r.push(img, repo+":v1")
		dg, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return img, dg.String()
	}
	_, pub, signer := writeKey(t, d.Dir, "cosign")
	_, cosignDigest := image("team/cosign")
	sig, err := signer.Cosign(r.addr+"/team/cosign", cosignDigest)
	if err != nil {
		t.Fatal(err)
	}
	sigImg, err := policy.SignatureImage([]policy.Signature{sig})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := policy.SignatureTag(cosignDigest)
	if err != nil {
		t.Fatal(err)
	}
	r.push(sigImg, "team/cosign:"+tag)
	bundled, bundleDigest := image("team/bundle")
	bsig, err := signer.Bundle(bundleDigest)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bundled.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := bundled.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	art, err := policy.BundleArtifact(bsig.Payload, v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(bundleDigest, "sha256:")}})
	if err != nil {
		t.Fatal(err)
	}
	ad, err := art.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r.push(art, "team/bundle@"+ad.String())
	_, unsignedDigest := image("team/unsigned")

	certs := filepath.Join(d.Dir, "certs.d")
	caPEM, err := os.ReadFile(r.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(certs, r.addr), 0o755); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{
		"hosts.toml": fmt.Sprintf("server = %q\nca = \"ca.pem\"\n", "https://"+r.addr),
		"ca.pem":     string(caPEM),
	} {
		if err := os.WriteFile(filepath.Join(certs, r.addr, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	creds := fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, r.addr, base64.StdEncoding.EncodeToString([]byte(r.user+":"+r.pass)))
	if err := os.WriteFile(filepath.Join(d.RootDir, "config.json"), creds, 0o600); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(d.Dir, "policy.json")
	doc := fmt.Sprintf(`{"default": [{"type": "reject"}],
 "transports": {"docker": {
  %q: [{"type": "sigstoreSigned", "keyPath": %q}],
  %q: [{"type": "sigstoreSigned", "keyPath": %q, "signedIdentity": {"type": "matchRepository"}}]}}}`,
		r.addr, pub, r.addr+"/team/cosign", pub)
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pull := func(ref string) (string, error) {
		out, err := exec.Command(testdaemon.Bin, "images", "pull", ref, "--image-policy", policyFile,
			"--root-dir", d.RootDir, "--run-dir", d.RunDir, "--registry-config-dir", certs).CombinedOutput()
		return string(out), err
	}
	for repo, digest := range map[string]string{"team/cosign": cosignDigest, "team/bundle": bundleDigest} {
		ref := r.addr + "/" + repo + ":v1"
		if out, err := pull(ref); err != nil || !strings.Contains(out, r.addr+"/"+repo+"@"+digest) {
			t.Errorf("images pull %s: %v\n%s", ref, err, out)
		}
	}
	index := filepath.Join(d.RootDir, "images", "index.json")
	before, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	unsigned := r.addr + "/team/unsigned:v1"
	out, err := pull(unsigned)
	if err == nil || !strings.Contains(out, "SignatureValidationFailed: ") || !strings.Contains(out, r.addr+"/team/unsigned@"+unsignedDigest) {
		t.Errorf("images pull %s: %v, want it refused\n%s", unsigned, err, out)
	}
	if after, err := os.ReadFile(index); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the refused pull changed the store's index (%v)", err)
	}
	ls := d.CLI("images", "ls")
	for _, repo := range []string{"team/cosign", "team/bundle"} {
		if !slices.ContainsFunc(strings.Split(ls, "\n"), func(l string) bool {
			return strings.Contains(l, repo) && strings.Contains(l, "verified by")
		}) {
			t.Errorf("%s is not listed as verified:\n%s", repo, ls)
		}
	}
}
