package manifest

import (
	"slices"
	"strings"
	"testing"
)

// A runtime built without seccomp (Paths.NoSeccomp) refuses, at conversion,
// every container that would get a filter, with the reason; validate's
// SeccompRefusals names the same manifests by field.
func TestNoSeccompRefusesFilteredContainers(t *testing.T) {
	const reason = "built without seccomp; build it with make build"
	head := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
	for _, tc := range []struct {
		name, doc      string
		seccompDefault bool
		wantErr        string   // of Container for the first container; "" none
		wantFields     []string // SeccompRefusals
	}{
		{"none", head + "  containers: [{name: c, image: i}]\n", false, "", nil},
		{"unconfined", head + "  securityContext: {seccompProfile: {type: Unconfined}}\n  containers: [{name: c, image: i}]\n", false, "", nil},
		// kubeadm's control-plane manifests.
		{"pod RuntimeDefault", head + "  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  containers: [{name: c, image: i}, {name: d, image: i}]\n",
			false, "seccompProfile RuntimeDefault: " + reason, []string{"spec.securityContext.seccompProfile"}},
		{"container RuntimeDefault", head + "  containers: [{name: c, image: i, securityContext: {seccompProfile: {type: RuntimeDefault}}}]\n",
			false, "seccompProfile RuntimeDefault: " + reason, []string{"spec.containers[0].securityContext.seccompProfile"}},
		{"container Unconfined over pod's", head + "  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  initContainers: [{name: init, image: i}]\n  containers: [{name: c, image: i, securityContext: {seccompProfile: {type: Unconfined}}}]\n",
			false, "", []string{"spec.securityContext.seccompProfile"}},
		{"privileged gets none", head + "  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  containers: [{name: c, image: i, securityContext: {privileged: true}}]\n", false, "", nil},
		{"seccompDefault", head + "  containers: [{name: c, image: i}]\n", true, "seccompProfile RuntimeDefault: " + reason, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := mustParse(t, tc.doc)
			c := &pod.Spec.Containers[0]
			_, err := Container(pod, c, 0, Paths{RootDir: t.TempDir(), SeccompDefault: tc.seccompDefault, NoSeccomp: reason}, machine(t))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Container: %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Container: %v, want %q", err, tc.wantErr)
			}
			// With seccomp there, the same container converts.
			if _, err := Container(pod, c, 0, Paths{RootDir: t.TempDir(), SeccompDefault: tc.seccompDefault}, machine(t)); err != nil {
				t.Errorf("Container with seccomp: %v", err)
			}
			var fields []string
			for _, e := range SeccompRefusals(pod, "/m/p.yaml", reason) {
				fields = append(fields, e.Field)
				if !strings.Contains(e.Error(), reason) || e.Origin != "/m/p.yaml" {
					t.Errorf("refusal %v lacks the reason or the origin", e)
				}
			}
			if !slices.Equal(fields, tc.wantFields) {
				t.Errorf("SeccompRefusals fields = %q, want %q", fields, tc.wantFields)
			}
		})
	}
}
