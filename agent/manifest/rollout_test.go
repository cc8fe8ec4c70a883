package manifest

import (
	"strings"
	"testing"
)

func TestRollbackAfterAnnotation(t *testing.T) {
	const origin = "/etc/kubernetes/manifests/web.yaml"
	for value, want := range map[string]string{
		"90s":                       "",
		"5m":                        "",
		"":                          "must be a duration",
		"ninety":                    "must be a duration",
		"-5s":                       "must be between 5s and 24h0m0s",
		"1s":                        "must be between",
		"100000h":                   "must be between",
		strings.Repeat("9", 100000): "must be a duration",
	} {
		doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    staticpodd.io/rollback-after: \"" + value +
			"\"\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
		p := Check([]byte(doc), SourceFile, origin, "node1")
		err := p.Err()
		if want == "" {
			if err != nil {
				t.Errorf("%.20q: %v", value, err)
			} else if d := RollbackAfter(p.Pods[0].Pod); d <= 0 {
				t.Errorf("%q: rollback-after %v", value, d)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), origin) ||
			!strings.Contains(err.Error(), "metadata.annotations[staticpodd.io/rollback-after]") {
			t.Errorf("%.20q: error %v, want one naming the file, the field and %q", value, err, want)
		} else if len(err.Error()) > 400 {
			t.Errorf("%.20q: error of %d bytes", value, len(err.Error()))
		}
	}
	if d := RollbackAfter(Check([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n"),
		SourceFile, origin, "node1").Pods[0].Pod); d != 0 {
		t.Errorf("no annotation: rollback-after %v", d)
	}
}
