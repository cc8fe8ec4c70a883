package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// seeds are real manifests: kubeadm's control plane (hostPath volumes,
// probes on named ports), the project's examples, multi-document YAML, JSON
// and PodLists. testdata/fuzz/FuzzX/ holds inputs the fuzzer once failed on.
func seeds(f *testing.F) {
	f.Helper()
	var files []string
	for _, glob := range []string{"testdata/fuzz/seeds/*", "testdata/*.yaml", "../../examples/manifests/*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		f.Fatalf("only %d seed manifests: %v", len(files), files)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// checkParsed holds what any input must give: errors or pods, never both;
// every error names the origin and says something; messages are valid UTF-8
// (a log line or a terminal never gets raw bytes of the input); and a pod is
// named, UID'd and stamped the way the rest of the daemon relies on.
func checkParsed(t *testing.T, data []byte, p Parsed, origin string) {
	t.Helper()
	if len(p.Errors) > 0 && p.Pods != nil {
		t.Fatalf("pods %d and errors %v", len(p.Pods), p.Err())
	}
	if len(p.Errors) == 0 && len(p.Pods) == 0 && !strings.Contains(string(data), "PodList") {
		t.Fatalf("no error and no pod")
	}
	for _, e := range p.Errors {
		if e.Origin != origin || e.Reason == "" {
			t.Fatalf("error without origin or reason: %#v", e)
		}
		if !utf8.ValidString(e.Error()) || !utf8.ValidString(e.Value) {
			t.Fatalf("error is not valid UTF-8: %q", e.Error())
		}
		if len(e.Value) > maxShown+32 {
			t.Fatalf("error shows %d bytes of value", len(e.Value))
		}
	}
	for _, w := range p.Warnings {
		if w.Origin != origin || !utf8.ValidString(w.String()) {
			t.Fatalf("warning %q", w.String())
		}
	}
	for _, pod := range p.Pods {
		if !ValidUID(string(pod.UID)) || pod.Annotations[AnnotationHash] != string(pod.UID) {
			t.Fatalf("pod %s: uid %q, hash %q", pod.Name, pod.UID, pod.Annotations[AnnotationHash])
		}
		if !strings.HasSuffix(pod.Name, "-node1") || pod.Namespace == "" || pod.Spec.NodeName != "node1" {
			t.Fatalf("pod %s/%s on %q", pod.Namespace, pod.Name, pod.Spec.NodeName)
		}
		if len(pod.Spec.Containers) == 0 || pod.Spec.TerminationGracePeriodSeconds == nil || *pod.Spec.TerminationGracePeriodSeconds < 0 {
			t.Fatalf("pod %s: containers %d, grace %v", pod.Name, len(pod.Spec.Containers), pod.Spec.TerminationGracePeriodSeconds)
		}
		for _, c := range AllContainers(pod.Pod) {
			if _, err := ContainerHash(pod.Pod, c); err != nil {
				t.Fatalf("pod %s: %v", pod.Name, err)
			}
		}
	}
}

// FuzzParseFile feeds the manifest parser and validator what a file in the
// manifest directory may hold. Parsing the same bytes twice gives the same
// pods: a UID that moved would restart the pod on the next relist.
func FuzzParseFile(f *testing.F) {
	seeds(f)
	const origin = "/etc/kubernetes/manifests/fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		p := Check(data, SourceFile, origin, "node1")
		checkParsed(t, data, p, origin)
		if len(p.Pods) > 1 {
			t.Fatalf("%d pods from one file", len(p.Pods))
		}
		again := Check(data, SourceFile, origin, "node1")
		if len(again.Pods) != len(p.Pods) || len(again.Errors) != len(p.Errors) {
			t.Fatalf("second parse differs: %d pods, %d errors; then %d, %d", len(p.Pods), len(p.Errors), len(again.Pods), len(again.Errors))
		}
		for i := range p.Pods {
			if again.Pods[i].UID != p.Pods[i].UID {
				t.Fatalf("UID %s, then %s", p.Pods[i].UID, again.Pods[i].UID)
			}
		}
	})
}

// FuzzParseURL feeds the decoder of a URL's body: a Pod or a PodList, all of
// it or none of it.
func FuzzParseURL(f *testing.F) {
	seeds(f)
	const origin = "http://10.0.0.1:8080/pods"
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, data, Check(data, SourceHTTP, origin, "node1"), origin)
	})
}

// The seed manifests are all good ones (the fuzzer mutates from there).
func TestFuzzSeedsParse(t *testing.T) {
	m, _ := filepath.Glob("testdata/fuzz/seeds/*")
	for _, p := range m {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		source := SourceFile
		if strings.Contains(p, "podlist") {
			source = SourceHTTP
		}
		got := Check(data, source, "/m/"+filepath.Base(p), "node1")
		if len(got.Errors) > 0 || len(got.Pods) == 0 {
			t.Errorf("%s: %v", p, got.Err())
		}
		for _, w := range got.Warnings {
			if !strings.Contains(w.Message, "only the first is used") {
				t.Errorf("%s: warning %s", p, w)
			}
		}
	}
}
