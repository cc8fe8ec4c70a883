package manifest

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// keepCases are manifests for which the copy kept beside the agent's state
// is the manifest itself or not: a Pod alone, Secrets with values and
// without, a List with a Secret, documents after a URL's first, text after
// a document's end, duplicate keys, escapes spelling "Secret".
func keepCases() []string {
	b64 := base64.StdEncoding.EncodeToString([]byte(canary))
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	return []string{
		pod,
		"# header\n---\n" + pod,
		pod + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n",
		pod + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n",
		pod + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: " + b64 + "}\n",
		pod + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {}\n",
		pod + "---\napiVersion: v1\nkind: \"Secr\\x65t\"\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n",
		pod + "---\napiVersion: v1\nkind: \"\\u0053ecret\"\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n",
		pod + "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  annotations: {staticpodd.io/credentials: \"k=cred\"}\n",
		pod + "...\n" + "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n",
		pod + "...\n# only a comment\n",
		"apiVersion: v1\nkind: Pod\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"` + canary + `"}}]}`,
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`,
		`{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`,
		"kind: [",
		"",
	}
}

// The parse's own answer is the same as reading the manifest again, for
// every source: a Pod alone is kept as written, without a second parse,
// and anything with a value to leave out is still left out.
func TestParsedWithoutSecretValues(t *testing.T) {
	for _, data := range keepCases() {
		for _, source := range []string{SourceFile, SourceHTTP, SourceBundle} {
			sameKeep(t, []byte(data), source)
		}
	}
	// And the case it is for: a Pod alone is not read again.
	pod := []byte(keepCases()[0])
	p := Check(pod, SourceFile, "/m/web.yaml", "node1")
	if n := testing.AllocsPerRun(10, func() { p.WithoutSecretValues(pod, SourceFile) }); n != 0 {
		t.Errorf("a Pod alone: %.0f allocations to keep it, want none (it is read again)", n)
	}
	// Asked for another source than it was parsed as, it reads again.
	if got, want := p.WithoutSecretValues(pod, SourceHTTP), WithoutSecretValues(pod, SourceHTTP); !bytes.Equal(got, want) {
		t.Errorf("another source: %q, want %q", got, want)
	}
}

func sameKeep(t *testing.T, data []byte, source string) {
	t.Helper()
	p := Check(data, source, "/m/web.yaml", "node1")
	got, want := p.WithoutSecretValues(data, source), WithoutSecretValues(data, source)
	if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%s, %q: the parse keeps %q, a second read %q", source, data, got, want)
	}
}

func FuzzParsedWithoutSecretValues(f *testing.F) {
	seeds(f)
	for _, c := range keepCases() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, source := range []string{SourceFile, SourceHTTP, SourceBundle} {
			sameKeep(t, data, source)
		}
	})
}
