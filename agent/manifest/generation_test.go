package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRegenerate(t *testing.T) {
	base := Pod{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "0123456789abcdef0123456789abcdef",
		Annotations: map[string]string{AnnotationHash: "0123456789abcdef0123456789abcdef"}}}, Origin: "/m/p.yaml"}

	if got := Regenerate(base, "", map[string]string{"a": "b"}); got.Pod != base.Pod {
		t.Errorf("an empty salt made a copy")
	}
	a := Regenerate(base, RestartSalt("2026-01-01T00:00:00Z"), map[string]string{AnnotationRestartedAt: "2026-01-01T00:00:00Z"})
	again := Regenerate(base, RestartSalt("2026-01-01T00:00:00Z"), nil)
	other := Regenerate(base, RestartSalt("2026-01-01T00:00:01Z"), nil)
	if a.UID == base.UID || a.UID != again.UID || a.UID == other.UID {
		t.Errorf("UIDs: base %s, salted %s, again %s, other salt %s", base.UID, a.UID, again.UID, other.UID)
	}
	if !ValidUID(string(a.UID)) || a.Annotations[AnnotationHash] != string(a.UID) || a.Annotations[AnnotationRestartedAt] != "2026-01-01T00:00:00Z" {
		t.Errorf("regenerated: UID %q, annotations %v", a.UID, a.Annotations)
	}
	if twice := Regenerate(a, "file:/x:absent\n", nil); ManifestUID(twice.Pod) != string(base.UID) || ManifestUID(a.Pod) != string(base.UID) || ManifestUID(base.Pod) != string(base.UID) {
		t.Errorf("manifest UIDs %s %s %s, want %s", ManifestUID(twice.Pod), ManifestUID(a.Pod), ManifestUID(base.Pod), base.UID)
	}
	if base.UID != "0123456789abcdef0123456789abcdef" || base.Annotations[AnnotationHash] != string(base.UID) || len(base.Annotations) != 1 || a.Origin != base.Origin {
		t.Errorf("the source's pod was changed: %v %v", base.UID, base.Annotations)
	}
}

// A manifest cannot name the kept manifest its pod is restored from.
func TestManifestUIDDropped(t *testing.T) {
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {" + AnnotationManifestUID + ": other}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	parsed := Check([]byte(doc), SourceFile, "/m/p.yaml", "n")
	if len(parsed.Errors) != 0 || len(parsed.Pods) != 1 {
		t.Fatalf("errors %v", parsed.Errors)
	}
	if got := ManifestUID(parsed.Pods[0].Pod); got != string(parsed.Pods[0].UID) {
		t.Errorf("manifest UID %q, the pod's %q", got, parsed.Pods[0].UID)
	}
}
