package manifest

import (
	"fmt"
	"strings"
	"testing"
)

const objPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: i}]\n"
const objConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a.conf: x}\n"
const objSecret = "apiVersion: v1\nkind: Secret\nmetadata: {name: sec, namespace: kube-system}\nstringData: {k: canary-7e1d}\n"

func describeParsed(p Parsed) string {
	var out []string
	for _, pod := range p.Pods {
		out = append(out, "pod "+pod.Namespace+"/"+pod.Name)
	}
	for _, o := range p.Objects {
		out = append(out, fmt.Sprintf("%s %s/%s from %s", o.Kind(), o.Namespace(), o.Name(), o.Origin))
	}
	return strings.Join(out, ", ")
}

// A file holds at most one Pod and any number of ConfigMaps and Secrets,
// named as the API names them; a file of objects only runs no pod.
func TestCheckObjectsInFile(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"pod and objects", objPod + "---\n" + objConfigMap + "---\n" + objSecret,
			"pod default/web-node1, ConfigMap default/cfg from /m/x.yaml, Secret kube-system/sec from /m/x.yaml"},
		{"objects only", "# header\n---\n" + objConfigMap + "---\n" + objSecret,
			"ConfigMap default/cfg from /m/x.yaml, Secret kube-system/sec from /m/x.yaml"},
		{"one object", objSecret, "Secret kube-system/sec from /m/x.yaml"},
		{"objects first", objConfigMap + "---\n" + objPod, "pod default/web-node1, ConfigMap default/cfg from /m/x.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Check([]byte(tc.data), SourceFile, "/m/x.yaml", "node1")
			if len(p.Errors) > 0 || len(p.Warnings) > 0 {
				t.Fatalf("errors %v, warnings %v", p.Errors, p.Warnings)
			}
			if got := describeParsed(p); got != tc.want {
				t.Errorf("got %s\nwant %s", got, tc.want)
			}
		})
	}
	// A pod's UID is its document's: an object added beside it changes
	// nothing of the pod.
	alone := Check([]byte(objPod), SourceFile, "/m/x.yaml", "node1")
	with := Check([]byte(objPod+"---\n"+objConfigMap), SourceFile, "/m/x.yaml", "node1")
	if alone.Pods[0].UID != with.Pods[0].UID {
		t.Errorf("UID %s with a ConfigMap beside the pod, %s without", with.Pods[0].UID, alone.Pods[0].UID)
	}
	// The secret's data is stringData merged.
	p := Check([]byte(objSecret), SourceFile, "/m/x.yaml", "node1")
	if got := string(p.Objects[0].Secret.Data["k"]); got != "canary-7e1d" {
		t.Errorf("data[k] = %q", got)
	}
}

// A file is used whole or not at all: a broken object stops the pod beside
// it, and each error names the document and the field, never a Secret's
// value.
func TestCheckObjectErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"bad key", objPod + "---\n" + objConfigMap + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a/b: canary-7e1d}\n",
			[]string{`/m/x.yaml: document 3: stringData[a/b]: Invalid value: "a/b"`}},
		{"not base64", objPod + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: canary-7e1d!}\n",
			[]string{`/m/x.yaml: document 2: data[k]: Invalid value: "<secret contents redacted>": must be base64`}},
		{"wrong type in stringData", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: [canary-7e1d]}\n",
			[]string{`/m/x.yaml: stringData[k]: Invalid value: "<secret contents redacted>": must be a string`}},
		{"no name", objPod + "---\napiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			[]string{"/m/x.yaml: document 2: metadata.name: Required value"}},
		{"twice", objConfigMap + "---\n" + objConfigMap,
			[]string{`document 2: metadata.name: Duplicate value: "ConfigMap default/cfg (also document 1)"`}},
		{"a list in a file", "apiVersion: v1\nkind: List\nitems: []\n",
			[]string{`kind: Unsupported value: "List": supported values: "Pod", "ConfigMap", "Secret"`}},
		{"broken YAML after the pod", objPod + "---\nkind: [\n",
			[]string{"/m/x.yaml: document 2: not YAML or JSON"}},
		{"bad separator", objPod + "--- x\n" + objConfigMap, []string{"not YAML: invalid Yaml document separator"}},
		{"secret too large", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: " + strings.Repeat("x", 1<<20) + ", b: z}\n",
			[]string{"/m/x.yaml: data: Too long: may not be more than 1048576 bytes (the values are 1048577 bytes together)"}},
		{"too many", strings.Repeat("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", MaxObjects+5),
			[]string{fmt.Sprintf("more than %d ConfigMaps and Secrets", MaxObjects)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Check([]byte(tc.data), SourceFile, "/m/x.yaml", "node1")
			if p.Pods != nil || p.Objects != nil {
				t.Errorf("pods %v, objects %v; want none of a file with an error", p.Pods, p.Objects)
			}
			got := p.Err()
			if got == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("errors:\n%v\nwant %q", got, w)
				}
			}
			if strings.Contains(got.Error(), "canary-7e1d") {
				t.Errorf("an error shows the secret's value:\n%v", got)
			}
		})
	}
}

// Unknown fields of an object are warnings naming the document.
func TestCheckObjectWarnings(t *testing.T) {
	p := Check([]byte(objPod+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndatta: {a: b}\n"), SourceFile, "/m/x.yaml", "node1")
	if len(p.Errors) > 0 || len(p.Warnings) != 1 || p.Warnings[0].String() != "/m/x.yaml: document 2: datta: unknown field, ignored" {
		t.Errorf("errors %v, warnings %v", p.Errors, p.Warnings)
	}
}

// A URL may serve a List of Pods, ConfigMaps and Secrets, taken whole or
// not at all, as a PodList.
func TestCheckList(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"i"}]}},
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"b"}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"sec"},"stringData":{"k":"canary-7e1d"}}]}`
	p := Check([]byte(list), SourceHTTP, "http://h/m", "node1")
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := describeParsed(p), "pod default/web-node1, ConfigMap default/cfg from http://h/m, Secret default/sec from http://h/m"; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	for _, tc := range []struct{ data, want string }{
		{strings.Replace(list, `"k":"canary-7e1d"`, `"a/b":"canary-7e1d"`, 1), `items[2].stringData[a/b]: Invalid value: "a/b"`},
		{`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","metadata":{"name":"x"}}]}`, `items[0].kind: Required value: want Pod or ConfigMap or Secret`},
		{`{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}]}`, `items[0].kind: Unsupported value: "ConfigMap": supported values: "Pod"`},
		{`{"apiVersion":"v1","kind":"List","items":[{"kind":"Deployment"}]}`, `items[0].kind: Unsupported value: "Deployment"`},
	} {
		p := Check([]byte(tc.data), SourceHTTP, "http://h/m", "node1")
		if p.Pods != nil || p.Objects != nil || p.Err() == nil || !strings.Contains(p.Err().Error(), tc.want) {
			t.Errorf("%s: pods %v objects %v errors %v; want none, and %q", tc.data, p.Pods, p.Objects, p.Err(), tc.want)
		}
		if p.Err() != nil && strings.Contains(p.Err().Error(), "canary-7e1d") {
			t.Errorf("an error shows the secret's value: %v", p.Err())
		}
	}
	// A lone ConfigMap from a URL is an object like any other.
	p = Check([]byte(objConfigMap), SourceHTTP, "http://h/m", "node1")
	if got := describeParsed(p); p.Err() != nil || got != "ConfigMap default/cfg from http://h/m" {
		t.Errorf("got %s, %v", got, p.Err())
	}
}

// YAML aliases are bounded over all the documents of a file, not each: ten
// documents that each expand a little under MaxSize are refused.
func TestCheckExpansionAcrossDocuments(t *testing.T) {
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\ndata:\n  a: &big " + strings.Repeat("x", 600<<10) + "\n  b: *big\n"
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, "---\n"+doc, i)
	}
	p := Check([]byte(b.String()), SourceFile, "/m/x.yaml", "node1")
	if p.Err() == nil || !strings.Contains(p.Err().Error(), "YAML aliases expand it to more than") {
		t.Errorf("errors %v, want the aliases refused", p.Err())
	}
}
