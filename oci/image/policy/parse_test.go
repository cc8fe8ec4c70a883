package policy

import (
	"crypto/elliptic"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// writeKey writes a fresh public key (and its private half) to dir.
func writeKey(t *testing.T, dir string) (pub, priv string) {
	t.Helper()
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.SkipPassword)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv = filepath.Join(dir, "key.pub"), filepath.Join(dir, "key.priv")
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// TestParseErrors: every refusal names the file, the JSON path and why.
func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	pub, priv := writeKey(t, dir)
	privPEM, _ := os.ReadFile(priv)
	accept := `[{"type": "insecureAcceptAnything"}]`
	signed := func(fields string) string {
		return `{"default": [{"type": "sigstoreSigned", ` + fields + `}]}`
	}
	for _, tc := range []struct{ doc, want string }{
		{`[]`, `policy.json: (top level): not a JSON object`},
		{`{"default": ` + accept + `} x`, `(top level): data after the JSON object`},
		{`{}`, `policy.json: default: missing`},
		{`{"default": ` + accept + `, "defualt": []}`, `policy.json: .defualt: unknown field`},
		{`{"default": ` + accept + `, "default": ` + accept + `}`, `policy.json: .default: given more than once`},
		{`{"default": []}`, `policy.json: default: an empty list of requirements`},
		{`{"default": {}}`, `policy.json: default: not a JSON array`},
		{`{"default": [{}]}`, `policy.json: default[0].type: missing`},
		{`{"default": [{"type": 1}]}`, `policy.json: default[0].type: not a JSON string`},
		{`{"default": [{"type": "accept"}]}`, `default[0].type: unknown requirement type "accept"`},
		{`{"default": [{"type": "reject", "keyPath": "/k"}]}`, `default[0].keyPath: unknown field of "reject"`},
		{`{"default": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k"}]}`, `default[0].type: "signedBy": GPG signatures are not implemented`},
		{`{"default": [{"type": "signedBaseLayer", "baseLayerIdentity": {"type": "matchExact"}}]}`, `default[0].type: "signedBaseLayer": not implemented`},
		{`{"default": ` + accept + `, "transports": {"docker": {"quay.io": [{"type": "signedBy"}]}}}`, `policy.json: transports.docker."quay.io"[0].type: "signedBy"`},
		{`{"default": ` + accept + `, "transports": {"dockr": {}}}`, `transports.dockr: unknown transport`},
		{`{"default": ` + accept + `, "transports": {"docker": {"busybox": ` + accept + `}}}`, `transports.docker.busybox: "busybox" does not start with a registry host`},
		{`{"default": ` + accept + `, "transports": {"docker": {"library/busybox": ` + accept + `}}}`, `does not start with a registry host`},
		{`{"default": ` + accept + `, "transports": {"docker": {"index.docker.io": ` + accept + `}}}`, `write "docker.io"`},
		{`{"default": ` + accept + `, "transports": {"docker": {"index.docker.io/library/busybox": ` + accept + `}}}`, `write "docker.io" for Docker Hub`},
		{`{"default": ` + accept + `, "transports": {"docker": {"*.": ` + accept + `}}}`, `a wildcard scope is *.DOMAIN`},
		{`{"default": ` + accept + `, "transports": {"docker": {"*.example.com/x": ` + accept + `}}}`, `a wildcard scope is *.DOMAIN`},
		{`{"default": ` + accept + `, "transports": {"docker": {"quay.io/A": ` + accept + `}}}`, `invalid image reference`},
		{`{"default": ` + accept + `, "transports": {"docker-archive": {"/x.tar": ` + accept + `}}}`, `transports.docker-archive."/x.tar": docker-archive has no scopes but the default ""`},
		{`{"default": ` + accept + `, "transports": {"oci-archive": {"x.tar": ` + accept + `}}}`, `"x.tar" is not an absolute path`},
		{`{"default": ` + accept + `, "transports": {"oci-archive": {"/": ` + accept + `}}}`, `write the default scope ""`},
		{`{"default": ` + accept + `, "transports": {"oci-archive": {"/a/../b": ` + accept + `}}}`, `is not a clean path: write "/b"`},
		{`{"default": ` + accept + `, "transports": {"docker-daemon": {"": []}}}`, `transports.docker-daemon."": an empty list`},
		{signed(`"keyPath": "` + pub + `", "keyData": "eA=="`), `default[0]: exactly one of keyPath, keyPaths, keyData and keyDatas must be given (2 are)`},
		{signed(`"signedIdentity": {"type": "matchExact"}`), `exactly one of keyPath, keyPaths, keyData and keyDatas must be given (0 are)`},
		{signed(`"keyPath": "key.pub"`), `default[0].keyPath: "key.pub" is not an absolute path`},
		{signed(`"keyPath": "` + dir + `/missing.pub"`), `default[0].keyPath: open ` + dir + `/missing.pub: no such file`},
		{signed(`"keyPath": "` + priv + `"`), `default[0].keyPath: ` + priv + `: not a PEM public key`},
		{signed(`"keyPaths": []`), `default[0].keyPaths: empty`},
		{signed(`"keyPaths": ["` + pub + `", 3]`), `default[0].keyPaths[1]: not a JSON string`},
		{signed(`"keyData": "%%%"`), `default[0].keyData: not base64`},
		{signed(`"keyData": "` + base64.StdEncoding.EncodeToString(privPEM) + `"`), `default[0].keyData: not a PEM public key`},
		{signed(`"keyDatas": []`), `default[0].keyDatas: empty`},
		{signed(`"keyPath": "` + pub + `", "fulcio": {}`), `default[0].fulcio: keyless (Fulcio) verification is not implemented`},
		{signed(`"fulcio": {"caPath": "/ca.pem"}, "rekorPublicKeyPath": "/r.pub"`), `default[0].fulcio: keyless (Fulcio) verification is not implemented`},
		{signed(`"keyPath": "` + pub + `", "rekorPublicKeyPath": "/r.pub"`), `default[0].rekorPublicKeyPath: transparency log (Rekor) verification is not implemented`},
		{signed(`"keyPath": "` + pub + `", "pki": {}`), `default[0].pki: X.509 PKI verification is not implemented`},
		{signed(`"keyPath": "` + pub + `", "keyType": "GPGKeys"`), `default[0].keyType: unknown field of "sigstoreSigned"`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "matchAnything"}`), `default[0].signedIdentity.type: unknown signedIdentity type "matchAnything"`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {}`), `default[0].signedIdentity.type: missing`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "matchExact", "dockerReference": "a:b"}`), `signedIdentity.dockerReference: unknown field of "matchExact"`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "exactReference"}`), `signedIdentity.dockerReference: missing`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "remapIdentity"}`), `signedIdentity.prefix: missing`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "remapIdentity", "prefix": "quay.io"}`), `signedIdentity.signedPrefix: missing`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "exactReference", "dockerReference": "quay.io/a"}`), `"quay.io/a" has neither a tag nor a digest`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "exactReference", "dockerReference": "Quay.io/a/B:1"}`), `signedIdentity.dockerReference: invalid image reference`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "exactRepository", "dockerRepository": "a//b"}`), `signedIdentity.dockerRepository: invalid image reference`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "remapIdentity", "prefix": "busybox", "signedPrefix": "quay.io"}`), `signedIdentity.prefix: "busybox" does not start with a registry host`},
		{signed(`"keyPath": "` + pub + `", "signedIdentity": {"type": "remapIdentity", "prefix": "quay.io", "signedPrefix": "quay.io/a:1"}`), `signedIdentity.signedPrefix: "quay.io/a:1": a prefix has no tag or digest`},
	} {
		_, err := Parse([]byte(tc.doc), "policy.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.doc, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error quotes the key or spans lines: %v", tc.doc, err)
		}
	}
}

// TestParseBounds: hostile keys and values are cut in messages, files are
// read bounded.
func TestParseBounds(t *testing.T) {
	long := strings.Repeat("k", 100000)
	_, err := Parse([]byte(`{"default": [{"type": "insecureAcceptAnything"}], "`+long+`": 1}`), "policy.json")
	if err == nil || len(err.Error()) > 1000 {
		t.Fatalf("error of %d bytes: %.200v", len(err.Error()), err)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, maxPolicyBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load of a big file: %v", err)
	}
	bigKey := filepath.Join(dir, "big.pub")
	if err := os.WriteFile(bigKey, make([]byte, maxKeyBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Parse([]byte(`{"default": [{"type": "sigstoreSigned", "keyPath": "`+bigKey+`"}]}`), "policy.json")
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a big key file: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	pub, _ := writeKey(t, dir)
	// A podman host's file: sections of transports images never arrive by
	// here are read and checked, never consulted.
	f := filepath.Join(dir, "policy.json")
	doc := `{
		"default": [{"type": "reject"}],
		"transports": {
			"docker-daemon": {"": [{"type": "insecureAcceptAnything"}]},
			"containers-storage": {"": [{"type": "insecureAcceptAnything"}]},
			"docker": {"registry.k8s.io": [{"type": "sigstoreSigned", "keyPath": "` + pub + `"}]}
		}
	}`
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Origin != f {
		t.Fatalf("Origin %q", p.Origin)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !os.IsNotExist(err) {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(f, []byte(`{"default": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); err == nil || !strings.HasPrefix(err.Error(), f+": default: ") {
		t.Fatalf("a bad file: %v", err)
	}
}

// TestScopePrecedence: the most specific scope wins, as containers/image
// looks them up.
func TestScopePrecedence(t *testing.T) {
	doc := `{"default": [{"type": "reject"}], "transports": {
		"docker": {
			"": [{"type": "reject"}],
			"*.io": [{"type": "reject"}],
			"*.example.io": [{"type": "reject"}],
			"reg.example.io": [{"type": "reject"}],
			"reg.example.io/team": [{"type": "reject"}],
			"reg.example.io/team/app": [{"type": "reject"}],
			"reg.example.io/team/app:v1": [{"type": "reject"}],
			"reg.example.io/team/app@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": [{"type": "reject"}],
			"localhost:5000/a": [{"type": "reject"}],
			"docker.io/library": [{"type": "reject"}]
		},
		"oci-archive": {
			"": [{"type": "reject"}],
			"/imports": [{"type": "reject"}],
			"/imports/trusted": [{"type": "reject"}],
			"/imports/trusted/a.tar": [{"type": "reject"}]
		}
	}}`
	p, err := Parse([]byte(doc), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ transport, scope, want string }{
		{TransportDocker, "reg.example.io/team/app:v1", `transports.docker."reg.example.io/team/app:v1"`},
		{TransportDocker, "reg.example.io/team/app:v2", `transports.docker."reg.example.io/team/app"`},
		{TransportDocker, "reg.example.io/team/app@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", `transports.docker."reg.example.io/team/app@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`},
		{TransportDocker, "reg.example.io/team/other:v1", `transports.docker."reg.example.io/team"`},
		{TransportDocker, "reg.example.io/x:v1", `transports.docker."reg.example.io"`},
		{TransportDocker, "other.example.io/x:v1", `transports.docker."*.example.io"`},
		{TransportDocker, "quay.io/x:v1", `transports.docker."*.io"`},
		{TransportDocker, "localhost:5000/a:1", `transports.docker."localhost:5000/a"`},
		{TransportDocker, "localhost:5000/b:1", `transports.docker.""`},
		{TransportDocker, "busybox", `transports.docker."docker.io/library"`}, // normalised: docker.io/library/busybox:latest
		{TransportDocker, "registry.k8s.io/pause:3.10", `transports.docker."*.io"`},
		{TransportDocker, "reg.local/pause:3.10", `transports.docker.""`},
		{TransportOCIArchive, "/imports/trusted/a.tar", `transports.oci-archive."/imports/trusted/a.tar"`},
		{TransportOCIArchive, "/imports/trusted/b.tar", `transports.oci-archive."/imports/trusted"`},
		{TransportOCIArchive, "/imports/x/../b.tar", `transports.oci-archive."/imports"`},
		{TransportOCIArchive, "/elsewhere/b.tar", `transports.oci-archive.""`},
		{TransportOCIArchive, "", `transports.oci-archive.""`},
		{TransportDockerArchive, "/imports/trusted/a.tar", `default`},
	} {
		_, where, err := p.requirementsFor(tc.transport, tc.scope)
		if err != nil || where != tc.want {
			t.Errorf("%s %s: %s, %v; want %s", tc.transport, tc.scope, where, err, tc.want)
		}
	}
	if _, _, err := p.requirementsFor(TransportOCIArchive, "rel/a.tar"); err == nil {
		t.Error("a relative archive path is looked up")
	}
	if _, _, err := p.requirementsFor(TransportDocker, "not a ref"); err == nil {
		t.Error("an invalid reference is looked up")
	}
}

func TestDockerNamespaces(t *testing.T) {
	got := strings.Join(dockerNamespaces("reg.example.com:5000/a/b"), " ")
	want := "reg.example.com:5000/a/b reg.example.com:5000/a reg.example.com:5000 *.example.com *.com"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
