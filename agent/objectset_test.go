package agent

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/source"
)

func configMap(origin, ns, name, value string) *objects.Object {
	return &objects.Object{Source: manifest.SourceFile, Origin: origin, ConfigMap: &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string]string{"k": value},
	}}
}

func TestMergeObjectsKeepsFirstByOriginAndNamesBoth(t *testing.T) {
	updates := map[string]source.Update{
		manifest.SourceHTTP: {Objects: []*objects.Object{configMap("http://x/list", "kube-system", "cfg", "from-url")}},
		manifest.SourceFile: {Objects: []*objects.Object{
			configMap("/etc/kubernetes/manifests/b.yaml", "kube-system", "cfg", "from-b"),
			configMap("/etc/kubernetes/manifests/a.yaml", "kube-system", "other", "a"),
			{Source: manifest.SourceFile, Origin: "/etc/kubernetes/manifests/a.yaml", Secret: &v1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cfg"},
			}},
		}},
	}
	set, problems := mergeObjects(updates)
	if set.Len() != 3 {
		t.Fatalf("set has %d objects, want 3 (a Secret and a ConfigMap may share a name)", set.Len())
	}
	// "/etc/..." sorts before "http://...".
	if got := set.ConfigMap("kube-system", "cfg").Data["k"]; got != "from-b" {
		t.Errorf("ConfigMap kube-system/cfg has k=%q, want the one of the first origin, from-b", got)
	}
	if set.Secret("kube-system", "cfg") == nil || set.ConfigMap("kube-system", "missing") != nil {
		t.Error("lookups by kind and name are wrong")
	}
	if len(problems) != 1 {
		t.Fatalf("problems %v, want one", problems)
	}
	msg := problems[0].Err.Error()
	if problems[0].Origin != "http://x/list" || !strings.Contains(msg, "/etc/kubernetes/manifests/b.yaml") ||
		!strings.Contains(msg, "ConfigMap kube-system/cfg") {
		t.Errorf("problem %s: %s, want it on the URL, naming both origins and the object", problems[0].Origin, msg)
	}
}
