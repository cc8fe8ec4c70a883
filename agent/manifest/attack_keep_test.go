package manifest

import (
	"slices"
	"strings"
	"testing"
)

// A URL List kept without its Secrets is encoded again: its pods' numbers
// must come out as written, or the restored pod is another pod (another
// grace period, another UID) than the one the server served.
func TestWithoutSecretValuesKeepsNumbers(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox","resources":{"limits":{"memory":123456789012345678}}}]}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"inline"},"stringData":{"k":"` + canary + `"}}]}`
	orig := Check([]byte(list), SourceHTTP, "http://x/", "node1")
	if err := orig.Err(); err != nil {
		t.Fatal(err)
	}
	kept := WithoutSecretValues([]byte(list), SourceHTTP)
	if strings.Contains(string(kept), canary) {
		t.Fatalf("kept copy holds the value:\n%s", kept)
	}
	p := Check(kept, SourceHTTP, "http://x/", "node1")
	if err := p.Err(); err != nil {
		t.Fatalf("kept copy not valid: %v\n%s", err, kept)
	}
	if len(p.Pods) != 1 {
		t.Fatalf("restored pods %d, want 1", len(p.Pods))
	}
	if p.Pods[0].UID != orig.Pods[0].UID {
		t.Errorf("restored pod UID %s, want %s; kept:\n%s", p.Pods[0].UID, orig.Pods[0].UID, kept)
	}
	got, want := p.Pods[0].Spec.Containers[0].Resources.Limits.Memory(), orig.Pods[0].Spec.Containers[0].Resources.Limits.Memory()
	if !got.Equal(*want) {
		t.Errorf("restored memory limit %s, want %s", got, want)
	}
}

// A Secret after a document's end ("...") in the same document is not read:
// the parser takes the first document only. It is not used, and must not be
// kept either.
func TestWithoutSecretValuesAfterDocumentEnd(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n"
	list := `{"apiVersion":"v1","kind":"List","items":[` +
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`
	for _, tc := range []struct {
		name, source, data string
	}{
		{"file", SourceFile, pod + "...\n" + secret},
		{"file, end with a comment", SourceFile, pod + "... # end\n" + secret},
		{"file, second document", SourceFile, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n" + pod + "...\n" + secret},
		{"url", SourceHTTP, pod + "...\n" + secret},
		{"url list", SourceHTTP, list + "\n...\n" + secret},
		{"file, a directive after the document", SourceFile, pod + "%YAML 1.1\n" + secret},
		{"url, a directive after the document", SourceHTTP, pod + "%TAG ! tag:x,2000:\n" + secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := Check([]byte(tc.data), tc.source, "/m/web.yaml", "node1")
			if err := orig.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(orig.Warnings, func(w Warning) bool { return strings.Contains(w.Message, "is not read") }) {
				t.Errorf("no warning that the Secret after ... is not read: %+v", orig.Warnings)
			}
			kept := WithoutSecretValues([]byte(tc.data), tc.source)
			if strings.Contains(string(kept), canary) {
				t.Fatalf("the kept copy holds a Secret's value:\n%s", kept)
			}
			p := Check(kept, tc.source, "/m/web.yaml", "node1")
			if err := p.Err(); err != nil {
				t.Fatalf("the kept copy is not valid: %v\n%s", err, kept)
			}
			if len(p.Pods) != 1 || p.Pods[0].UID != orig.Pods[0].UID || len(p.Objects) != len(orig.Objects) {
				t.Fatalf("kept copy gives %d pods, %d objects, want the UID %s and %d objects:\n%s", len(p.Pods), len(p.Objects), orig.Pods[0].UID, len(orig.Objects), kept)
			}
			if again := WithoutSecretValues(kept, tc.source); string(again) != string(kept) {
				t.Errorf("a kept copy kept again changed:\n%s\n---\n%s", kept, again)
			}
		})
	}
	// A "..." with nothing after it is kept as written.
	if got := WithoutSecretValues([]byte(pod+"...\n# bye\n"), SourceFile); string(got) != pod+"...\n# bye\n" {
		t.Errorf("a document ended by ... kept as %q", got)
	}
}

// A URL List encoded again is no larger than its body needs: json.Marshal's
// HTML escaping writes each <, > and & as six bytes, and a 2 MiB body came
// back over MaxSize, a save file the next daemon refuses.
func TestWithoutSecretValuesSize(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"note":"` + strings.Repeat("<", 2<<20) + `","spec":{"containers":[{"name":"c","image":"busybox"}]}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"inline"},"stringData":{"k":"` + canary + `"}}]}`
	orig := Check([]byte(list), SourceHTTP, "http://x/", "node1")
	if err := orig.Err(); err != nil {
		t.Fatal(err)
	}
	kept := WithoutSecretValues([]byte(list), SourceHTTP)
	if len(kept) > len(list) {
		t.Errorf("kept copy of %d bytes, more than the body's %d", len(kept), len(list))
	}
	p := Check(kept, SourceHTTP, "http://x/", "node1")
	if err := p.Err(); err != nil {
		t.Fatalf("kept copy not valid: %v", err)
	}
	if len(p.Pods) != 1 || p.Pods[0].UID != orig.Pods[0].UID {
		t.Errorf("kept copy gives another pod")
	}
}

// A URL's body is read as one document: a Secret in a document after the
// first is not used, and must not be kept either, whatever the first is.
func TestWithoutSecretValuesURLDocumentsAfterFirst(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n"
	list := `{"apiVersion":"v1","kind":"List","items":[` +
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}` + "\n"
	for _, data := range []string{
		pod + "---\n" + secret,
		list + "---\n" + secret,
		pod + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n" + secret,
	} {
		orig := Check([]byte(data), SourceHTTP, "http://x/", "node1")
		if err := orig.Err(); err != nil || len(orig.Pods) != 1 {
			t.Fatalf("%q: %v, %d pods", data, err, len(orig.Pods))
		}
		for name, kept := range map[string][]byte{
			"WithoutSecretValues":        WithoutSecretValues([]byte(data), SourceHTTP),
			"Parsed.WithoutSecretValues": orig.WithoutSecretValues([]byte(data), SourceHTTP),
		} {
			if strings.Contains(string(kept), canary) {
				t.Errorf("%s: the kept copy holds a Secret's value:\n%s", name, kept)
				continue
			}
			p := Check(kept, SourceHTTP, "http://x/", "node1")
			if err := p.Err(); err != nil || len(p.Pods) != 1 || p.Pods[0].UID != orig.Pods[0].UID {
				t.Errorf("%s: the kept copy gives %d pods, %v, want the UID %s:\n%s", name, len(p.Pods), err, orig.Pods[0].UID, kept)
			}
			if again := WithoutSecretValues(kept, SourceHTTP); string(again) != string(kept) {
				t.Errorf("%s: a kept copy kept again changed:\n%s\n---\n%s", name, kept, again)
			}
		}
	}
}

// YAML breaks lines at a lone CR, a NEL and the Unicode line and paragraph
// separators as at a LF: a "---" or "..." after one of them ends the
// document the parser reads, and a "#" line ends at one. A Secret written
// after such a break is either read (and left out of the kept copy) or not
// read (and not kept either): never kept in clear.
func TestWithoutSecretValuesOtherLineBreaks(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n"
	flow := "{apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {k: " + canary + "}}\n"
	podFlow := "{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: c, image: busybox}]}}"
	for _, brk := range []string{"\r", "\u0085", "\u2028", "\u2029"} {
		all := func(s string) string { return strings.ReplaceAll(s, "\n", brk) }
		for _, data := range []string{
			all(pod + "---\n" + secret),
			all(pod + "...\n" + secret),
			all(pod + "--- # two\n" + secret),
			pod + "---\n# a comment" + brk + flow,
			"# a comment" + brk + flow + "---\n" + pod,
			all(pod) + "--- " + flow,
			"# a comment" + brk + "--- " + podFlow + brk + "--- " + flow,
		} {
			keptHasNoSecretValue(t, data, false) // a Secret read is left out whole
		}
	}
}

// A document whose root is a flow collection ends where the collection
// does: the parser does not read, nor refuse, what follows it, a second
// JSON object as well as anything else. A Secret there is not used, and
// must not be kept either.
func TestWithoutSecretValuesAfterFlowRoot(t *testing.T) {
	podJS := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	podFlow := "{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: c, image: busybox}]}}"
	listJS := `{"apiVersion":"v1","kind":"List","items":[` + podJS + `]}`
	secJS := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"` + canary + `"}}`
	for _, data := range []string{
		podJS + "\n" + secJS + "\n",
		podJS + secJS,
		podJS + " " + secJS,
		"# a header\n" + podJS + "\n" + secJS,
		podFlow + "\n" + secJS,
		"&a " + podFlow + "\n" + secJS,
		"!!map " + podJS + "\n" + secJS,
		listJS + "\n" + secJS,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n" + podJS + "\n" + secJS,
		"\ufeff" + podJS + "\n" + secJS,
		// An indented root ends at a line less indented.
		"  apiVersion: v1\n  kind: Pod\n  metadata: {name: web}\n  spec:\n    containers: [{name: c, image: busybox}]\n" + secJS,
		"\ufeff  apiVersion: v1\n  kind: Pod\n  metadata: {name: web}\n  spec:\n    containers: [{name: c, image: busybox}]\n" +
			"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: " + canary + "}\n",
	} {
		keptHasNoSecretValue(t, data, true)
	}
	// A manifest that is JSON alone is kept as written.
	for _, data := range []string{podJS, podJS + "\n", "# a header\n" + podJS, listJS} {
		if got := WithoutSecretValues([]byte(data), SourceHTTP); string(got) != data {
			t.Errorf("%q kept as %q", data, got)
		}
	}
}

// keptHasNoSecretValue checks, for each source that accepts data, that the
// copy kept of it (by WithoutSecretValues and by the parse's own answer)
// holds no Secret's value, gives the same pods and objects (UID included),
// and is kept again as it is; sameObjects: the same objects too, where no
// Secret with values is read.
func keptHasNoSecretValue(t *testing.T, data string, sameObjects bool) {
	t.Helper()
	for _, source := range []string{SourceFile, SourceHTTP, SourceBundle} {
		orig := Check([]byte(data), source, "/m/web.yaml", "node1")
		if orig.Err() != nil {
			continue // not kept
		}
		for name, kept := range map[string][]byte{
			"WithoutSecretValues":        WithoutSecretValues([]byte(data), source),
			"Parsed.WithoutSecretValues": orig.WithoutSecretValues([]byte(data), source),
		} {
			if strings.Contains(string(kept), canary) {
				t.Errorf("%s, %q: %s keeps a Secret's value:\n%q", source, data, name, kept)
				continue
			}
			p := Check(kept, source, "/m/web.yaml", "node1")
			if err := p.Err(); err != nil || len(p.Pods) != len(orig.Pods) || len(p.Pods) == 1 && p.Pods[0].UID != orig.Pods[0].UID || sameObjects && len(p.Objects) != len(orig.Objects) {
				t.Errorf("%s, %q: %s: the kept copy gives %d pods, %d objects, %v; want %d, %d:\n%q", source, data, name, len(p.Pods), len(p.Objects), err, len(orig.Pods), len(orig.Objects), kept)
			}
			if again := WithoutSecretValues(kept, source); string(again) != string(kept) {
				t.Errorf("%s, %q: %s: a kept copy kept again changed:\n%s\n---\n%s", source, data, name, kept, again)
			}
		}
	}
}
