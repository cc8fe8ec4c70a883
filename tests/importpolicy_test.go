package tests

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

// signArchive writes to out the OCI archive in with a cosign signature of
// its image, as ref, by s: an entry of its layout named by cosign's tag
// scheme, as `cosign save` or skopeo copy a signed image.
func signArchive(t *testing.T, in, out, ref string, s *sign.Signer) {
	t.Helper()
	dir := t.TempDir()
	untarLayout(t, in, dir)
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	digest := im.Manifests[0].Digest.String()
	sig, err := s.Cosign(ref, digest)
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
	if err := lp.AppendImage(sigImg, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// untarLayout unpacks the plain tar of an OCI layout at p into dir.
func untarLayout(t *testing.T, p, dir string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(target, b, 0o644)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// importedState is what an import may change in the daemon's store: the
// index, the layers and the kept signatures.
func importedState(t *testing.T, d *daemon) string {
	t.Helper()
	var b strings.Builder
	idx, err := os.ReadFile(filepath.Join(d.RootDir, "images", "index.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	b.Write(idx)
	for _, sub := range []string{"layers", "signatures"} {
		ents, err := os.ReadDir(filepath.Join(d.RootDir, "images", sub))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range ents {
			b.WriteString("\n" + sub + "/" + e.Name())
		}
	}
	return b.String()
}

// dropImport puts the archive at src into the daemon's import folder as
// name, whole at once (a rename), as an operator's copy ends.
func dropImport(t *testing.T, d *daemon, src, name string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.RootDir, "images", "import")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, name+".part")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// Under a policy requiring a key of OCI archives, the import folder refuses
// an unsigned archive and one signed by another key (logged with the
// policy's reason, the file left, the store unchanged, the pod waiting for
// its image), and imports the one signed by the key: the pod runs from it.
func TestImportFolderUnderPolicy(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	_, pub, key := writeKey(t, d.Dir, "cosign")
	_, _, other := writeKey(t, d.Dir, "other")
	pol := filepath.Join(d.Dir, "policy.json")
	if err := os.WriteFile(pol, fmt.Appendf(nil, `{"default": [{"type": "insecureAcceptAnything"}],
		"transports": {"oci-archive": {"": [{"type": "sigstoreSigned", "keyPath": %q}]}}}`, pub), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--image-policy", pol)
	const ref = "example.com/signed:v1"
	plain := filepath.Join(d.Dir, "plain.tar")
	buildImage(t, plain, "-ref", ref, "-format", "oci")
	signed := filepath.Join(d.Dir, "signed.tar")
	signArchive(t, plain, signed, ref, key)
	byOther := filepath.Join(d.Dir, "other.tar")
	signArchive(t, plain, byOther, ref, other)

	d.Start()
	d.WriteManifest("signed.yaml", `apiVersion: v1
kind: Pod
metadata: {name: signed}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: `+ref+`
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	d.Eventually(30*time.Second, "ErrImageNeverPull", func() error {
		p := d.Pod("signed")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil ||
			p.Status.ContainerStatuses[0].State.Waiting.Reason != "ErrImageNeverPull" {
			return errors.New("not waiting for its image yet")
		}
		return nil
	})

	before := importedState(t, d)
	for name, reason := range map[string]string{
		"unsigned.tar": "no signature exists",
		"other.tar":    "not signed by key cosign.pub",
	} {
		src := plain
		if name == "other.tar" {
			src = byOther
		}
		dropImport(t, d, src, name)
		d.Eventually(30*time.Second, name+" refused", func() error {
			for _, line := range strings.Split(d.Output(), "\n") {
				if strings.Contains(line, "refused by the image policy") && strings.Contains(line, name) {
					if !strings.Contains(line, "SignatureValidationFailed") || !strings.Contains(line, reason) {
						t.Errorf("refusal of %s does not say why (%q): %s", name, reason, line)
					}
					return nil
				}
			}
			return errors.New("no refusal logged")
		})
		if _, err := os.Stat(filepath.Join(d.RootDir, "images", "import", name)); err != nil {
			t.Errorf("refused %s not left in the import folder: %v", name, err)
		}
	}
	if after := importedState(t, d); after != before {
		t.Errorf("refused imports changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if w := d.Pod("signed").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ErrImageNeverPull" {
		t.Errorf("pod after the refusals: waiting %+v, want still ErrImageNeverPull", w)
	}

	dropImport(t, d, signed, "signed.tar")
	d.WaitRunning("signed", 90*time.Second)
	if out := d.CLI("images", "ls"); !strings.Contains(out, "verified by") {
		t.Errorf("images ls does not say the image is verified:\n%s", out)
	}
}
