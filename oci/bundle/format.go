package bundle

import (
	"fmt"
	"strings"
	"time"
)

// The bundle's media types. Its manifest is an OCI image manifest with
// artifactType ArtifactType, whose config is the Metadata (JSON) and whose
// one layer is a tar of the manifest files.
const (
	ArtifactType       = "application/vnd.staticpodd.bundle.v1+json"
	MediaTypeMetadata  = "application/vnd.staticpodd.bundle.config.v1+json"
	MediaTypeManifests = "application/vnd.staticpodd.bundle.manifests.v1.tar"
	// AnnotationName names the bundle on its index.json entry. Not
	// org.opencontainers.image.ref.name: the bundle is no image to import.
	AnnotationName = "io.staticpodd.bundle.name"
)

// Limits on what a bundle may hold. A bundle is hostile until its signature
// is verified, and Apply reads all of it before it verifies it: every count
// and size a bundle controls is bounded.
const (
	MaxImages    = 64
	MaxManifests = 256
	// MaxManifestBytes is one manifest file's size, the kubelet's
	// maxConfigLength (manifest.MaxSize); MaxManifestsBytes all of them.
	MaxManifestBytes  = 10 << 20
	MaxManifestsBytes = 64 << 20
	// MaxJSONBytes bounds index.json, a manifest, the metadata.
	MaxJSONBytes = 4 << 20
	// MaxBlobs bounds the blobs of the layout (images, signatures).
	MaxBlobs = 8192
	// DefaultMaxBytes is what a bundle (download, and the layout it holds,
	// decompressed) may weigh unless ApplyOptions.MaxBytes says otherwise.
	DefaultMaxBytes = 16 << 30
	maxNameLen      = 253
)

// Metadata is the bundle manifest's config: what it holds, which the
// signature covers through the manifest's digest.
type Metadata struct {
	Name      string    `json:"name"`
	Created   time.Time `json:"created,omitzero"`
	Manifests []File    `json:"manifests"`
	// Images are every image the manifests name, each by the manifest
	// digest it is verified and run by.
	Images []ImageRef `json:"images"`
}

// File is one manifest file of a bundle.
type File struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// ImageRef is one image of a bundle, as Metadata lists it.
type ImageRef struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// CheckFileName refuses a manifest file name a bundle may not use: it
// becomes a file under bundles/<hex>/manifests, which the file source
// reads (and skips dot-files in).
func CheckFileName(name string) error {
	switch {
	case name == "" || len(name) > 255:
		return fmt.Errorf("file name %q: empty or longer than 255 bytes", trunc(name))
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("file name %q: has a path separator or NUL", trunc(name))
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("file name %q: starts with a dot", trunc(name))
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("file name %q: has a control character", trunc(name))
		}
	}
	return nil
}

// CheckName refuses a bundle name that is not a DNS subdomain (RFC 1123),
// as Kubernetes names objects.
func CheckName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("bundle name %q: must be 1 to %d characters", trunc(name), maxNameLen)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("bundle name %q: must be a DNS subdomain (lower case letters, digits, '-' and '.')", trunc(name))
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return fmt.Errorf("bundle name %q: must be a DNS subdomain (lower case letters, digits, '-' and '.')", trunc(name))
			}
		}
	}
	return nil
}

// trunc bounds a hostile string quoted in a message.
func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// check refuses metadata that breaks the limits or names a file or image
// twice.
func (m Metadata) check() error {
	if err := CheckName(m.Name); err != nil {
		return err
	}
	if len(m.Manifests) == 0 || len(m.Manifests) > MaxManifests {
		return fmt.Errorf("%d manifest files: must be 1 to %d", len(m.Manifests), MaxManifests)
	}
	if len(m.Images) > MaxImages {
		return fmt.Errorf("%d images: at most %d", len(m.Images), MaxImages)
	}
	seen := map[string]bool{}
	var total int64
	for _, f := range m.Manifests {
		if err := CheckFileName(f.Name); err != nil {
			return err
		}
		if seen[f.Name] {
			return fmt.Errorf("file %s: listed twice", f.Name)
		}
		seen[f.Name] = true
		if !validDigest(f.Digest) {
			return fmt.Errorf("file %s: digest %q is not sha256:<hex>", f.Name, trunc(f.Digest))
		}
		if f.Size < 0 || f.Size > MaxManifestBytes {
			return fmt.Errorf("file %s: %d bytes: at most %d", f.Name, f.Size, MaxManifestBytes)
		}
		total += f.Size
	}
	if total > MaxManifestsBytes {
		return fmt.Errorf("manifest files: %d bytes: at most %d", total, MaxManifestsBytes)
	}
	refs := map[string]bool{}
	for _, i := range m.Images {
		if i.Ref == "" || len(i.Ref) > 512 {
			return fmt.Errorf("image %q: empty or longer than 512 bytes", trunc(i.Ref))
		}
		if refs[i.Ref] {
			return fmt.Errorf("image %s: listed twice", i.Ref)
		}
		refs[i.Ref] = true
		if !validDigest(i.Digest) {
			return fmt.Errorf("image %s: digest %q is not sha256:<hex>", i.Ref, trunc(i.Digest))
		}
	}
	return nil
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	return ok && validHex(h)
}
