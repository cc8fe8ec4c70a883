package manifest

import (
	"strings"
	"testing"
)

func TestFollowTagsAnnotation(t *testing.T) {
	const origin = "/etc/kubernetes/manifests/web.yaml"
	for value, want := range map[string]string{
		"1h":                        "",
		"10s":                       "",
		"168h":                      "",
		"":                          "must be a duration",
		"hourly":                    "must be a duration",
		"5s":                        "must be between 10s and 168h0m0s",
		"169h":                      "must be between",
		strings.Repeat("9", 100000): "must be a duration",
	} {
		doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    staticpodd.io/follow-tags: \"" + value +
			"\"\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
		p := Check([]byte(doc), SourceFile, origin, "node1")
		err := p.Err()
		if want == "" {
			if err != nil {
				t.Errorf("%.20q: %v", value, err)
			} else if d := FollowTags(p.Pods[0].Pod); d <= 0 {
				t.Errorf("%q: follow-tags %v", value, d)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), origin) ||
			!strings.Contains(err.Error(), "metadata.annotations[staticpodd.io/follow-tags]") {
			t.Errorf("%.20q: error %v, want one naming the file, the field and %q", value, err, want)
		} else if len(err.Error()) > 400 {
			t.Errorf("%.20q: error of %d bytes", value, len(err.Error()))
		}
	}
}

func TestFollowSalt(t *testing.T) {
	if s := FollowSalt(nil, []string{"a"}); s != "" {
		t.Errorf("no digest: salt %q", s)
	}
	d := map[string]string{"a": "r/a@sha256:1", "b": "r/b@sha256:2"}
	if s := FollowSalt(d, []string{"a", "b"}); s != "follow:a=r/a@sha256:1\nfollow:b=r/b@sha256:2\n" {
		t.Errorf("salt %q", s)
	}
}
