package manifest

import (
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
