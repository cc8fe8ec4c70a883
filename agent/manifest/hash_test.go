package manifest

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const hashPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  initContainers:
  - name: init
    image: busybox
    command: [/bin/true]
  containers:
  - name: app
    image: nginx:1.27
    env:
    - {name: A, value: "1"}
    resources:
      limits: {memory: 64Mi}
  - name: side
    image: busybox
    args: [sleep, 1d]
`

// The same pod as hashPod: JSON, keys in another order, other formatting.
const hashPodJSON = `{"spec": {"containers": [
  {"resources": {"limits": {"memory": "64Mi"}}, "env": [{"value": "1", "name": "A"}], "image": "nginx:1.27", "name": "app"},
  {"args": ["sleep", "1d"], "name": "side", "image": "busybox"}],
  "initContainers": [{"command": ["/bin/true"], "image": "busybox", "name": "init"}]},
 "kind": "Pod", "metadata": {"name": "web"}, "apiVersion": "v1"}`

func hashesOf(t *testing.T, doc, path string) map[string]string {
	t.Helper()
	pods, _, err := ParseFile([]byte(doc), path, "node1")
	if err != nil {
		t.Fatal(err)
	}
	pod := pods[0].Pod
	out := map[string]string{}
	for _, c := range AllContainers(pod) {
		h, err := ContainerHash(pod, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 32 {
			t.Errorf("hash %q: want 32 hex digits", h)
		}
		out[c.Name] = h
	}
	return out
}

func TestContainerHash(t *testing.T) {
	base := hashesOf(t, hashPod, "/m/web.yaml")

	// The container as written, not as defaulted: pinned, so that a new
	// k8s.io/api default or field cannot change it unnoticed. It is the first
	// 16 bytes of sha256(`{"args":["sleep","1d"],"image":"busybox","name":"side"}`).
	if want := "5af9817ea52999ea56f7675775c05bf9"; base["side"] != want {
		t.Errorf("hash of side = %s, want %s", base["side"], want)
	}

	same := hashesOf(t, "# reformatted\n"+hashPodJSON, "/elsewhere/other.json")
	for name, h := range base {
		if same[name] != h {
			t.Errorf("%s: hash %s from the same pod written differently, want %s", name, same[name], h)
		}
	}

	for _, tc := range []struct {
		what, from, to string
		changed        string // the one container whose hash must change; "" = none
	}{
		{"image", "nginx:1.27", "nginx:1.28", "app"},
		{"env value", `value: "1"`, `value: "2"`, "app"},
		{"limit", "memory: 64Mi", "memory: 65Mi", "app"},
		{"args", "args: [sleep, 1d]", "args: [sleep, 2d]", "side"},
		{"init command", "command: [/bin/true]", "command: [/bin/false]", "init"},
		{"an explicit default", "  - name: side\n", "  - name: side\n    imagePullPolicy: IfNotPresent\n", "side"},
		{"pod labels", "  name: web\n", "  name: web\n  labels: {a: b}\n", ""},
	} {
		if !strings.Contains(hashPod, tc.from) {
			t.Fatalf("%s: %q not in the pod", tc.what, tc.from)
		}
		got := hashesOf(t, strings.Replace(hashPod, tc.from, tc.to, 1), "/m/web.yaml")
		for name, h := range base {
			if changed := got[name] != h; changed != (name == tc.changed) {
				t.Errorf("changing %s: hash of %s changed = %v", tc.what, name, changed)
			}
		}
	}
}

// A pod built in code has no written form: its containers are hashed as v1
// structs, still stable and still sensitive to changes.
func TestContainerHashWithoutManifest(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	h1, err := ContainerHash(pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := ContainerHash(pod, &pod.Spec.Containers[0])
	pod.Spec.Containers[0].Image = "nginx"
	h3, _ := ContainerHash(pod, &pod.Spec.Containers[0])
	if h1 != h2 || h1 == h3 || len(h1) != 32 {
		t.Errorf("hashes %q %q (changed image %q)", h1, h2, h3)
	}
}

// A PodList from a URL: each item's containers hash as written.
func TestContainerHashPodList(t *testing.T) {
	list := `{"apiVersion": "v1", "kind": "PodList", "items": [` + hashPodJSON + `]}`
	pods, _, err := ParseURL([]byte(list), "http://127.0.0.1/pods", "node1")
	if err != nil {
		t.Fatal(err)
	}
	base := hashesOf(t, hashPod, "/m/web.yaml")
	pod := pods[0].Pod
	for _, c := range AllContainers(pod) {
		if h, _ := ContainerHash(pod, c); h != base[c.Name] {
			t.Errorf("%s: hash %s from a list, want %s", c.Name, h, base[c.Name])
		}
	}
}

// computeUID hashes what json.Marshal gives, without holding a copy of it.
func TestComputeUIDIsMarshalsHash(t *testing.T) {
	doc, err := decodeGeneric([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a<b>&c","annotations":{"x":"\u2028 1e+26 \n"}},"spec":{"n":[1,2.5,-0,1e400,"é"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	h := md5.New()
	fmt.Fprintf(h, "url:%s", "http://x/pods")
	h.Write(canonical)
	got, err := computeUID(doc, SourceHTTP, "http://x/pods", "node1")
	if want := hex.EncodeToString(h.Sum(nil)); err != nil || got != want {
		t.Errorf("computeUID = %s, %v; want %s", got, err, want)
	}
}
