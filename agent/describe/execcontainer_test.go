package describe

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExecContainer(t *testing.T) {
	pod := func(annotation string, init []string, names ...string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1"}}
		if annotation != "" {
			p.Annotations = map[string]string{DefaultContainerAnnotation: annotation}
		}
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n})
		}
		for _, n := range init {
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n})
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		flag       string
		want, note string
		err        string
	}{
		{name: "one container", pod: pod("", nil, "a"), want: "a"},
		{name: "first of several, with kubectl's note", pod: pod("", nil, "a", "b"),
			want: "a", note: `Defaulted container "a" out of: a, b`},
		{name: "init containers count", pod: pod("", []string{"setup"}, "a"),
			want: "a", note: `Defaulted container "a" out of: a, setup (init)`},
		{name: "annotation, no note", pod: pod("b", nil, "a", "b"), want: "b"},
		{name: "annotation naming no container", pod: pod("zz", nil, "a", "b"),
			want: "a", note: `Defaulted container "a" out of: a, b`},
		{name: "-c", pod: pod("b", nil, "a", "b"), flag: "a", want: "a"},
		{name: "-c an init container", pod: pod("", []string{"setup"}, "a"), flag: "setup", want: "setup"},
		{name: "-c unknown", pod: pod("", []string{"setup"}, "a", "b"), flag: "c",
			err: `pod web-node1 has no container "c"; it has a, b, setup (init)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note, err := ExecContainer(tc.pod, tc.flag)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || note != tc.note {
				t.Errorf("= %q, %q, %v; want %q, %q", got, note, err, tc.want, tc.note)
			}
		})
	}
}
