package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

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

func TestImagesLsJSON(t *testing.T) {
	root := t.TempDir()
	out, _, err := run("images", "ls", "-o", "json", "--root-dir", root)
	if err != nil || strings.Join(strings.Fields(out), "") != `{"images":[]}` {
		t.Fatalf("empty store: %q, %v", out, err)
	}
	if _, _, err := run("images", "ls", "-o", "yaml", "--root-dir", root); err == nil {
		t.Error("-o yaml accepted")
	}
	created := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	used := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	imgs := []image.Image{
		{ID: "sha256:aa", Refs: []string{"docker.io/library/nginx:1.27"}, RepoDigests: []string{"docker.io/library/nginx@sha256:dd"}, Size: 42, Created: created, Pinned: true},
		{ID: "sha256:bb", Created: created, Digest: "sha256:ee", Verification: &policy.Verdict{Decision: policy.Verified, By: "key cosign.pub"}},
	}
	var buf bytes.Buffer
	if err := printImagesJSON(&buf, imgs, func(id string) time.Time {
		if id == "sha256:aa" {
			return used
		}
		return time.Time{}
	}); err != nil {
		t.Fatal(err)
	}
	var got map[string][]map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	want := map[string][]map[string]any{"images": {
		{"id": "sha256:aa", "repoTags": []any{"docker.io/library/nginx:1.27"}, "repoDigests": []any{"docker.io/library/nginx@sha256:dd"},
			"size": 42.0, "pinned": true, "created": "2024-05-01T10:00:00Z", "lastUsed": "2025-01-02T02:04:05Z", "verification": nil},
		{"id": "sha256:bb", "repoTags": []any{}, "repoDigests": []any{}, "size": 0.0, "pinned": false,
			"created": "2024-05-01T10:00:00Z", "lastUsed": nil, "digest": "sha256:ee",
			"verification": map[string]any{"decision": "verified", "by": "key cosign.pub"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// The VERIFICATION column: each verdict on one line, a refusal's reason cut
// to the column's width and its control characters shown, not obeyed.
func TestVerificationColumn(t *testing.T) {
	for _, tc := range []struct {
		v    *policy.Verdict
		want string
	}{
		{nil, "-"},
		{&policy.Verdict{Decision: policy.Accepted}, "accepted"},
		{&policy.Verdict{Decision: policy.Verified, By: "key cosign.pub"}, "verified by key cosign.pub"},
		{&policy.Verdict{Decision: policy.Rejected, Reason: "oci-archive: reject"}, "rejected by policy: oci-archive: reject"},
		{&policy.Verdict{Decision: policy.Rejected, Reason: "no signature\n\x1b[2J" + strings.Repeat("x", 200)},
			"rejected by policy: no signature \\x1b[2J" + strings.Repeat("x", 72-1-len("rejected by policy: no signature \\x1b[2J")) + "…"},
	} {
		if got := verification(tc.v); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.v, got, tc.want)
		}
	}
}
