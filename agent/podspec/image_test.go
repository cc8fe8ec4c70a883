package podspec

import (
	"strings"
	"testing"
)

func TestNormalizeImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for in, want := range map[string]string{
		"busybox":                                "docker.io/library/busybox:latest",
		"busybox:latest":                         "docker.io/library/busybox:latest",
		"busybox:1.36":                           "docker.io/library/busybox:1.36",
		"library/busybox":                        "docker.io/library/busybox:latest",
		"docker.io/busybox":                      "docker.io/library/busybox:latest",
		"docker.io/library/busybox":              "docker.io/library/busybox:latest",
		"index.docker.io/library/busybox:1":      "docker.io/library/busybox:1",
		"me/app:v1":                              "docker.io/me/app:v1",
		"localhost/app":                          "localhost/app:latest",
		"localhost:5000/x/y:tag":                 "localhost:5000/x/y:tag",
		"127.0.0.1:5000/a/b":                     "127.0.0.1:5000/a/b:latest",
		"[::1]:5000/a":                           "[::1]:5000/a:latest",
		"registry.k8s.io/kube-apiserver:v1.37.2": "registry.k8s.io/kube-apiserver:v1.37.2",
		"registry.k8s.io/etcd:3.5.9-0":           "registry.k8s.io/etcd:3.5.9-0",
		"quay.io/a_b/c__d/e--f.g:T_1.x-y":        "quay.io/a_b/c__d/e--f.g:T_1.x-y",
		"Registry.Example.COM/app":               "Registry.Example.COM/app:latest",
		"busybox@" + digest:                      "docker.io/library/busybox@" + digest,
		"busybox:1.36@" + digest:                 "docker.io/library/busybox@" + digest,
		"quay.io/x/y@" + digest:                  "quay.io/x/y@" + digest,
		"a/" + strings.Repeat("b", 200):          "docker.io/a/" + strings.Repeat("b", 200) + ":latest",
		"x:" + strings.Repeat("t", 128):          "docker.io/library/x:" + strings.Repeat("t", 128),
	} {
		got, err := NormalizeImage(in)
		if err != nil {
			t.Errorf("NormalizeImage(%q): %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("NormalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeImageRefuses(t *testing.T) {
	for in, reason := range map[string]string{
		"":                                    "empty",
		"../../etc:x":                         `registry ".."`,
		"../etc":                              `registry ".."`,
		"a/../../b":                           `repository path component ".."`,
		"./x":                                 `registry "."`,
		"x/./y":                               `repository path component "."`,
		"x//y":                                `repository path component ""`,
		"/x":                                  `repository path component ""`,
		"x/":                                  `repository path component ""`,
		"localhost/../x":                      `repository path component ".."`,
		"UPPER/case":                          `repository path component "UPPER"`,
		"Busybox":                             `repository path component "Busybox"`,
		"a b":                                 `repository path component "a b"`,
		"a_-b":                                `repository path component "a_-b"`,
		"-a":                                  `repository path component "-a"`,
		"x:.tag":                              `tag ".tag"`,
		"x:-tag":                              `tag "-tag"`,
		"x:" + strings.Repeat("t", 129):       `tag "ttt`,
		"x:":                                  `tag ""`,
		"reg..io/x":                           `registry "reg..io"`,
		"-reg.io/x":                           `registry "-reg.io"`,
		"reg.io:port/x":                       `registry "reg.io:port"`,
		"x@sha256:short":                      "invalid image reference",
		"x@md5:" + strings.Repeat("0", 32):    "invalid image reference",
		"x@sha256:" + strings.Repeat("A", 64): "invalid image reference",
		strings.Repeat("0123456789abcdef", 4): "image ID",
		"a/" + strings.Repeat("b", 254):       "over 255",
	} {
		got, err := NormalizeImage(in)
		if err == nil {
			t.Errorf("NormalizeImage(%q) = %q, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), reason) || !strings.Contains(err.Error(), "invalid image reference") {
			t.Errorf("NormalizeImage(%q): %v; want it to say %q", in, err, reason)
		}
	}
}

// A reference comes from an image archive or a manifest, of any length, and
// every reason the parser gives quotes it: the error stays short whatever
// part of it is long.
func TestImageRefErrorBounded(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	for _, in := range []string{
		long + ":t",
		"x:" + long,
		"x@sha256:" + long,
		"Reg.io/" + long,
		long + "@sha256:" + strings.Repeat("0", 64),
	} {
		_, err := NormalizeImage(in)
		if err == nil {
			t.Fatalf("NormalizeImage(%.40q…) passed", in)
		}
		if n := len(err.Error()); n > 2*MaxEventMessage || !strings.HasPrefix(err.Error(), `invalid image reference "`) {
			t.Errorf("NormalizeImage(%.40q…): an error of %d bytes: %.200s", in, n, err)
		}
	}
}
