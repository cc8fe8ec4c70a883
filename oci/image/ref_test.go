package image

import "testing"

func TestNormalize(t *testing.T) {
	digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct{ in, want string }{
		{"nginx", "docker.io/library/nginx:latest"},
		{"nginx:1.27", "docker.io/library/nginx:1.27"},
		{"docker.io/nginx", "docker.io/library/nginx:latest"},
		{"index.docker.io/library/nginx:1", "docker.io/library/nginx:1"},
		{"user/app", "docker.io/user/app:latest"},
		{"localhost:5000/a/b", "localhost:5000/a/b:latest"},
		{"quay.io/x/y@" + digest, "quay.io/x/y@" + digest},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if err != nil {
			t.Errorf("Normalize(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"", "UPPER/case", "a b", "x@sha256:short"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}
