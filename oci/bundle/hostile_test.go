package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// appendEntries puts a tar entry before the end of the tar in b for each
// name, with the content of that path under dir (names may climb out).
func appendEntries(t *testing.T, b []byte, dir string, names []string) bytes.Buffer {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		var body bytes.Buffer
		body.ReadFrom(tr)
		tw.WriteHeader(hdr)
		tw.Write(body.Bytes())
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(data))})
		tw.Write(data)
	}
	tw.Close()
	return out
}

// TestExtractRefuses keeps a hostile tar to the names of a layout.
func TestExtractRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  tar.Header
		want string
	}{
		{"climb", tar.Header{Name: "../../etc/x", Typeflag: tar.TypeReg}, "not part of an OCI layout"},
		{"absolute", tar.Header{Name: "/etc/x", Typeflag: tar.TypeReg}, "not part of an OCI layout"},
		{"symlink", tar.Header{Name: "index.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "not a regular file"},
		{"hardlink", tar.Header{Name: "blobs/sha256/" + strings.Repeat("a", 64), Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}, "not a regular file"},
		{"other dir", tar.Header{Name: "blobs/sha512/", Typeflag: tar.TypeDir}, "not a regular file"},
		{"bad blob name", tar.Header{Name: "blobs/sha256/../../x", Typeflag: tar.TypeReg}, "not part of an OCI layout"},
		{"blob not its digest", tar.Header{Name: "blobs/sha256/" + strings.Repeat("a", 64), Typeflag: tar.TypeReg, Size: 1}, "tampered or corrupt"},
		{"huge index", tar.Header{Name: "index.json", Typeflag: tar.TypeReg, Size: MaxJSONBytes + 1}, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			hdr := tc.hdr
			hdr.Mode, hdr.ModTime = 0o644, time.Unix(0, 0)
			if err := tw.WriteHeader(&hdr); err != nil {
				t.Fatal(err)
			}
			if hdr.Typeflag == tar.TypeReg {
				tw.Write(bytes.Repeat([]byte("x"), int(min(hdr.Size, 1))))
			}
			tw.Flush()
			dir := t.TempDir()
			err := extract(context.Background(), bytes.NewReader(b.Bytes()), dir, 1<<20, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("extract: %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "etc")); err == nil {
				t.Error("wrote outside the layout dir")
			}
		})
	}
}

// TestMetadataRefuses bounds what signed metadata may say, too: a signer's
// key may leak, and a file name becomes a path on the node.
func TestMetadataRefuses(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name string
		md   Metadata
		want string
	}{
		{"traversal", Metadata{Name: "x", Manifests: []File{{Name: "../x.yaml", Digest: d}}}, "path separator"},
		{"dot-file", Metadata{Name: "x", Manifests: []File{{Name: ".x.yaml", Digest: d}}}, "starts with a dot"},
		{"dotdot", Metadata{Name: "x", Manifests: []File{{Name: "..", Digest: d}}}, "starts with a dot"},
		{"twice", Metadata{Name: "x", Manifests: []File{{Name: "a", Digest: d}, {Name: "a", Digest: d}}}, "twice"},
		{"huge file", Metadata{Name: "x", Manifests: []File{{Name: "a", Digest: d, Size: MaxManifestBytes + 1}}}, "at most"},
		{"no files", Metadata{Name: "x"}, "must be 1 to"},
		{"bad name", Metadata{Name: "X/y", Manifests: []File{{Name: "a", Digest: d}}}, "DNS subdomain"},
		{"many images", Metadata{Name: "x", Manifests: []File{{Name: "a", Digest: d}}, Images: make([]ImageRef, MaxImages+1)}, "at most"},
		{"bad digest", Metadata{Name: "x", Manifests: []File{{Name: "a", Digest: "md5:x"}}}, "not sha256"},
	} {
		if err := tc.md.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestExtractEndless stops a stream of entries that write nothing.
func TestExtractEndless(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for range MaxBlobs + 32 {
		tw.WriteHeader(&tar.Header{Name: "blobs/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.Close()
	err := extract(context.Background(), &b, t.TempDir(), 1<<20, false)
	if err == nil || !strings.Contains(err.Error(), "tar entries") {
		t.Fatalf("extract: %v, want too many entries", err)
	}
}

// TestDownloadBounded stops a body longer than the bundle may be, said or
// not, and a redirect from https to http.
func TestDownloadBounded(t *testing.T) {
	ctx := context.Background()
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/said" {
			w.Header().Set("Content-Length", "100000")
		}
		tw := tar.NewWriter(w)
		data := bytes.Repeat([]byte("x"), 100000)
		tw.WriteHeader(&tar.Header{Name: "oci-layout", Typeflag: tar.TypeReg, Size: int64(len(data)), Mode: 0o644})
		tw.Write(data)
	}))
	defer endless.Close()
	for _, p := range []string{"/said", "/unsaid"} {
		err := download(ctx, endless.URL+p, t.TempDir(), ApplyOptions{MaxBytes: 4096})
		if err == nil || !strings.Contains(err.Error(), "4096") {
			t.Errorf("%s: %v, want refused at 4096 bytes", p, err)
		}
	}
	tls := httptest.NewTLSServer(http.RedirectHandler(endless.URL+"/said", http.StatusFound))
	defer tls.Close()
	_, err := stage(ctx, tls.URL, t.TempDir(), ApplyOptions{MaxBytes: 1 << 20, Client: tls.Client()})
	if err == nil || !strings.Contains(err.Error(), "redirect from https to http refused") {
		t.Errorf("https to http: %v", err)
	}
}
