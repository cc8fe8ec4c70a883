package image

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// dockerConfig is a .dockerconfigjson with one entry per key: "user:pass".
func dockerConfig(entries ...string) []byte {
	var parts []string
	for i := 0; i+1 < len(entries); i += 2 {
		parts = append(parts, fmt.Sprintf("%q:{\"auth\":%q}", entries[i], base64.StdEncoding.EncodeToString([]byte(entries[i+1]))))
	}
	return []byte(`{"auths":{` + strings.Join(parts, ",") + `}}`)
}

// A pod's pull secrets are tried as the kubelet's keyring orders them (the
// most specific key first, the pod's order under one key), then the node's
// Docker config if it has the image's registry; a secret for another
// registry changes nothing.
func TestPullSecrets(t *testing.T) {
	reg := newTestRegistry(t, false)
	reg.push(t, "private/app:v1", testImage(t))
	reg.user, reg.pass = "alice", "s3cret"
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, "server = \"http://"+reg.host+"\"\n")
	nodeCfg := filepath.Join(t.TempDir(), "config.json")
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, CredentialPaths: []string{nodeCfg}}, discardLogger())
	ref := reg.host + "/private/app:v1"
	pull := func(secrets ...podspec.PullSecret) error {
		_, err := p.PullWith(t.Context(), ref, PullOptions{Secrets: secrets})
		return err
	}
	secret := func(name string, cfg []byte) podspec.PullSecret {
		return podspec.PullSecret{Name: "default/" + name, Config: cfg}
	}
	right := secret("right", dockerConfig(reg.host, "alice:s3cret"))
	wrong := secret("wrong", dockerConfig(reg.host, "alice:wrong"))
	elsewhere := secret("elsewhere", dockerConfig("other.example.com", "alice:s3cret"))

	if err := pull(); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("pull without secrets: %v, want the registry's UNAUTHORIZED", err)
	}
	if err := pull(elsewhere); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("pull with another registry's secret: %v, want UNAUTHORIZED", err)
	}
	if err := pull(wrong); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("pull with a wrong password: %v, want UNAUTHORIZED", err)
	}
	if err := pull(wrong, right); err != nil {
		t.Fatalf("pull with a wrong then a right secret: %v", err)
	}
	if err := pull(right, wrong); err != nil {
		t.Fatalf("pull with a right then a wrong secret: %v", err)
	}
	// A key with the repository's path comes before the registry's alone.
	if err := pull(secret("both", dockerConfig(reg.host, "alice:wrong", reg.host+"/private", "alice:s3cret"))); err != nil {
		t.Fatalf("pull with a path key: %v", err)
	}
	if err := pull(secret("legacy", []byte(fmt.Sprintf(`{%q:{"username":"alice","password":"s3cret"}}`, reg.host)))); err == nil {
		t.Fatal("a .dockercfg read as a .dockerconfigjson pulled")
	}
	if err := pull(podspec.PullSecret{Name: "default/legacy", Legacy: true, Config: []byte(fmt.Sprintf(`{%q:{"username":"alice","password":"s3cret"}}`, reg.host))}); err != nil {
		t.Fatalf("pull with a .dockercfg: %v", err)
	}
	// The node's credentials come after a wrong secret's.
	if err := os.WriteFile(nodeCfg, dockerConfig(reg.host, "alice:s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pull(wrong); err != nil {
		t.Fatalf("pull with a wrong secret and the node's credentials: %v", err)
	}
}

// A broken secret fails the pull naming it, never quoting its bytes.
func TestPullSecretErrorsHideValues(t *testing.T) {
	const canary = "Zcanary-7f3a"
	p := NewPuller(openStore(t), PullConfig{}, discardLogger())
	for _, cfg := range []string{
		`{"auths":{"reg.example.com":{"auth":"` + canary + `"}}}`,
		`{"auths":{"reg.example.com":{"password":` + canary + `}}}`,
		`{"auths":{"reg.example.com":{"password":"x"}}` + canary,
		`{"auths":` + canary + `}`,
	} {
		_, err := p.PullWith(t.Context(), "reg.example.com/app:v1", PullOptions{Secrets: []podspec.PullSecret{{Name: "kube-system/regcred", Config: []byte(cfg)}}})
		if err == nil || !strings.Contains(err.Error(), "image pull secret kube-system/regcred") {
			t.Errorf("pull with %s: %v, want an error naming the secret", cfg, err)
		}
		// A JSON syntax error quotes one character: the canary's first, Z.
		if err != nil && (strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "Z")) {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
	s := podspec.PullSecret{Name: "kube-system/regcred", Config: []byte(canary)}
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), fmt.Sprint([]podspec.PullSecret{s})} {
		if strings.Contains(out, canary) {
			t.Errorf("formatting a pull secret shows its config: %s", out)
		}
	}
}

// A pull without the pod's secret does not join one with it under way, and
// fails as the registry says, while pulls with the same secret share one.
func TestPullSecretsDoNotShareAPull(t *testing.T) {
	reg := newTestRegistry(t, false)
	reg.push(t, "private/app:v1", testImage(t))
	reg.user, reg.pass = "alice", "s3cret"
	gate, entered := make(chan struct{}), make(chan struct{}, 100)
	wait := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.Contains(r.URL.Path, "/manifests/") {
			entered <- struct{}{}
			<-gate
		}
		next.ServeHTTP(w, r)
	}
	reg.wrap.Store(&wait)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, "server = \"http://"+reg.host+"\"\n")
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger())
	ref := reg.host + "/private/app:v1"
	right := []podspec.PullSecret{{Name: "a/right", Config: dockerConfig(reg.host, "alice:s3cret")}}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := p.PullWith(t.Context(), ref, PullOptions{Secrets: right})
			done <- err
		}()
	}
	<-entered
	if _, err := p.PullWith(t.Context(), ref, PullOptions{}); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("pull without the secret, another pod's under way: %v, want UNAUTHORIZED", err)
	}
	close(gate)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("pull with the secret: %v", err)
		}
	}
	if n := len(entered); n != 0 {
		t.Errorf("the two pulls with one secret made %d more manifest requests, want them to share one pull", n)
	}
}
