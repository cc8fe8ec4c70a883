package main

import "testing"

func TestRepoDigestOf(t *testing.T) {
	digests := []string{"docker.io/library/nginx@sha256:aa", "127.0.0.1:5000/team/app@sha256:bb"}
	for ref, want := range map[string]string{
		"docker.io/library/nginx:latest":    "sha256:aa",
		"docker.io/library/nginx:1.27":      "sha256:aa",
		"127.0.0.1:5000/team/app:v1":        "sha256:bb",
		"127.0.0.1:5000/team/app@sha256:bb": "sha256:bb",
		"127.0.0.1:5000/team/other:v1":      "<none>",
		"docker.io/library/busybox:latest":  "<none>",
		"127.0.0.1:5000/team:v1":            "<none>",
	} {
		if got := repoDigestOf(ref, digests); got != want {
			t.Errorf("repoDigestOf(%q) = %q, want %q", ref, got, want)
		}
	}
	if got := repoDigestOf("docker.io/library/nginx:latest", nil); got != "<none>" {
		t.Errorf("an imported image: %q, want <none>", got)
	}
}
