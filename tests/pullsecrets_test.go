package tests

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// pullSecret is a manifest of a Secret of type, whose key holds config.
func pullSecret(name, typ, key, config string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s}
type: %s
data:
  %s: %s
`, name, typ, key, base64.StdEncoding.EncodeToString([]byte(config)))
}

// A pod's imagePullSecrets, Secrets in files beside it, open Docker's
// registry (TLS, basic auth) to its pulls, as the kubelet's: a
// .dockerconfigjson or a legacy .dockercfg with the password runs; no
// secret, a wrong password or a missing secret is the registry's refusal,
// the missing secret named in an event and by ps -o wide. The node has no
// credentials of its own; each pod pulls (Always) while the others do, so a
// pull shared across credentials would show. The password is nowhere in
// what the daemon says.
func TestPullSecretsDistributionRegistry(t *testing.T) {
	t.Parallel()
	bin := registryBin(t)
	d := newDaemon(t)
	r := startDistRegistry(t, bin)
	base, err := tarball.ImageFromPath(testdaemon.Image, nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := mutate.AppendLayers(base, fileLayer(t, map[string][]byte{"version": []byte("private-v1")}))
	if err != nil {
		t.Fatal(err)
	}
	r.push(app, "team/private:v1")
	appRef := r.addr + "/team/private:v1"

	certs := filepath.Join(d.Dir, "certs.d")
	if err := os.MkdirAll(filepath.Join(certs, r.addr), 0o755); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(r.caFile)
	if err != nil {
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
	d.Args = append(d.Args, "--registry-config-dir", certs)
	readyDir := filepath.Join(d.Dir, "ready")
	if err := os.MkdirAll(readyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	auth := func(pass string) string { return base64.StdEncoding.EncodeToString([]byte(r.user + ":" + pass)) }
	d.WriteManifest("regcred.yaml", pullSecret("regcred", "kubernetes.io/dockerconfigjson", ".dockerconfigjson",
		fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, r.addr, auth(r.pass))))
	d.WriteManifest("legacycred.yaml", pullSecret("legacycred", "kubernetes.io/dockercfg", ".dockercfg",
		fmt.Sprintf(`{%q:{"username":%q,"password":%q}}`, "https://"+r.addr, r.user, r.pass)))
	d.WriteManifest("wrongcred.yaml", pullSecret("wrongcred", "kubernetes.io/dockerconfigjson", ".dockerconfigjson",
		fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, r.addr, auth("wrong"))))
	pod := func(name string, secrets ...string) {
		m := readyPod(name, appRef, readyDir)
		if len(secrets) > 0 {
			m += "  imagePullSecrets:\n"
			for _, s := range secrets {
				m += "  - name: " + s + "\n"
			}
		}
		d.WriteManifest(name+".yaml", m)
	}
	pod("withsecret", "absent", "wrongcred", "regcred")
	pod("legacy", "legacycred")
	pod("nosecret")
	pod("wrongsecret", "wrongcred")
	pod("missing", "absent")
	d.Start()

	for _, name := range []string{"withsecret", "legacy"} {
		d.Eventually(60*time.Second, name+" runs the private image", func() error {
			b, err := os.ReadFile(filepath.Join(readyDir, name))
			if err != nil {
				return fmt.Errorf("%v; pod %+v", err, statusOf(d.Pod(name)).State)
			}
			if string(b) != "private-v1" {
				return fmt.Errorf("it runs %q", b)
			}
			return nil
		})
	}
	for _, name := range []string{"nosecret", "wrongsecret", "missing"} {
		d.Eventually(60*time.Second, name+" waits on the registry's refusal", func() error {
			w := statusOf(d.Pod(name)).State.Waiting
			if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") {
				return fmt.Errorf("waiting %+v", w)
			}
			if !strings.Contains(w.Message, "UNAUTHORIZED") || !strings.Contains(w.Message, r.addr) {
				return fmt.Errorf("message %q does not carry the registry's answer", w.Message)
			}
			return nil
		})
	}
	d.Eventually(30*time.Second, "the missing secret is said", func() error {
		if ev := d.CLI("events"); !strings.Contains(ev, "FailedToRetrieveImagePullSecret") ||
			!strings.Contains(ev, "Unable to retrieve some image pull secrets (absent)") {
			return fmt.Errorf("events:\n%s", ev)
		}
		if ps := d.CLI("ps", "-o", "wide"); !strings.Contains(ps, "secret default/absent (FailedToRetrieveImagePullSecret") {
			return fmt.Errorf("ps -o wide:\n%s", ps)
		}
		return nil
	})
	if ps := d.CLI("ps", "-o", "wide"); strings.Count(ps, "secret default/absent") != 1 {
		t.Errorf("ps -o wide names the missing secret of the pod that runs, or none:\n%s", ps)
	}
	if out := d.CLI("describe", "missing"); !strings.Contains(out, "Waiting For:") || !strings.Contains(out, "secret default/absent") {
		t.Errorf("describe does not say the pod waits for its pull secret:\n%s", out)
	}

	for what, out := range map[string]string{"the daemon's output": d.Output(), "events": d.CLI("events"),
		"ps -o wide": d.CLI("ps", "-o", "wide"), "describe": d.CLI("describe", "withsecret")} {
		if strings.Contains(out, r.pass) || strings.Contains(out, auth(r.pass)) {
			t.Errorf("%s show the registry's password", what)
		}
	}
	if t.Failed() {
		t.Logf("registry's log:\n%s", r.Stderr())
	}
	for _, f := range []string{"withsecret", "legacy", "nosecret", "wrongsecret", "missing", "regcred", "legacycred", "wrongcred"} {
		d.RemoveManifest(f + ".yaml")
	}
	d.Eventually(30*time.Second, "the pods are gone", func() error {
		if n := len(d.Pods()); n != 0 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	d.AssertNoLeaks()
}
