package manifest

import (
	"encoding/base64"
	"strings"
	"testing"
)

const canary = "CANARY-inline-7f3a"

// A kept copy has no Secret with values of its own, and gives the same pod
// (UID included) with the other objects: ConfigMaps, and Secrets whose values
// all come from credentials.
func TestWithoutSecretValues(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(canary))
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	file := "# header\n" + pod +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: inline}\nstringData: {k: " + canary + "} # " + canary + "\n" +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: encoded}\ndata: {k: " + b64 + "}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n" +
		"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  annotations: {staticpodd.io/credentials: \"k=cred\"}\n" +
		"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: mixed\n  annotations: {staticpodd.io/credentials: \"k=cred\"}\nstringData: {plain: " + canary + "}\n"
	list := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"inline"},"stringData":{"k":"` + canary + `"}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"encoded"},"data":{"k":"` + b64 + `"}},
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"b"}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds","annotations":{"staticpodd.io/credentials":"k=cred"}}}]}`
	for _, tc := range []struct {
		name, source, data string
	}{
		{"file", SourceFile, file},
		{"url list", SourceHTTP, list},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := Check([]byte(tc.data), tc.source, "/m/web.yaml", "node1")
			if err := orig.Err(); err != nil {
				t.Fatal(err)
			}
			kept := WithoutSecretValues([]byte(tc.data), tc.source)
			if strings.Contains(string(kept), canary) || strings.Contains(string(kept), b64) {
				t.Fatalf("the kept copy holds a Secret's value:\n%s", kept)
			}
			p := Check(kept, tc.source, "/m/web.yaml", "node1")
			if err := p.Err(); err != nil {
				t.Fatalf("the kept copy is not valid: %v\n%s", err, kept)
			}
			if len(p.Pods) != 1 || p.Pods[0].UID != orig.Pods[0].UID {
				t.Fatalf("pods of the kept copy %v, want the UID %s", p.Pods, orig.Pods[0].UID)
			}
			var names []string
			for _, o := range p.Objects {
				names = append(names, o.Kind()+"/"+o.Name())
			}
			if got := strings.Join(names, " "); got != "ConfigMap/cfg Secret/creds" {
				t.Errorf("objects of the kept copy: %s, want the ConfigMap and the Secret of credentials only", got)
			}
			if again := WithoutSecretValues(kept, tc.source); string(again) != string(kept) {
				t.Errorf("a kept copy kept again changed:\n%s\n---\n%s", kept, again)
			}
		})
	}

	// Nothing to leave out: the bytes as written.
	if got := WithoutSecretValues([]byte(pod), SourceFile); string(got) != pod {
		t.Errorf("a manifest without Secrets kept as %q", got)
	}
	// A URL serving one Secret is kept as a body that gives nothing.
	one := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"` + canary + `"}}`
	kept := WithoutSecretValues([]byte(one), SourceHTTP)
	if p := Check(kept, SourceHTTP, "http://x/", "node1"); p.Err() != nil || len(p.Pods)+len(p.Objects) != 0 || strings.Contains(string(kept), canary) {
		t.Errorf("one Secret served, kept as %q: %+v", kept, p)
	}
}
