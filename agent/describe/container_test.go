package describe

import (
	"bytes"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefaultContainer(t *testing.T) {
	ctrs := func(names ...string) []v1.Container {
		var out []v1.Container
		for _, n := range names {
			out = append(out, v1.Container{Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		annotation string
		init, ctrs []v1.Container
		want, note string
	}{
		{"one container", "", nil, ctrs("web"), "web", ""},
		{"two: the first", "", nil, ctrs("web", "sidecar"), "web", `Defaulted container "web" out of: web, sidecar` + "\n"},
		{"annotated", "sidecar", nil, ctrs("web", "sidecar"), "sidecar", ""},
		{"annotation names none", "nope", nil, ctrs("web", "sidecar"), "web", `Defaulted container "web" out of: web, sidecar` + "\n"},
		{"init containers count", "", ctrs("setup"), ctrs("web"), "web", `Defaulted container "web" out of: web, setup (init)` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: tc.init, Containers: tc.ctrs}}
			if tc.annotation != "" {
				pod.ObjectMeta = metav1.ObjectMeta{Annotations: map[string]string{DefaultContainerAnnotation: tc.annotation}}
			}
			var note bytes.Buffer
			if got := DefaultContainer(pod, &note); got != tc.want || note.String() != tc.note {
				t.Errorf("got %q, note %q; want %q, note %q", got, note.String(), tc.want, tc.note)
			}
		})
	}
}
