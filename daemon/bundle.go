package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/oci/bundle"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

// bundleNode is the node name a bundle's manifests are checked for: they
// are made on a build machine for nodes it does not know, and a pod's name
// is the only thing the node name changes.
const bundleNode = "node"

// BundleCreate is what `staticpodd bundle create` makes a bundle of.
type BundleCreate struct {
	Name string
	Key  string // the private key that signs it
	Out  string // the archive to write ("" with Push only)
	Push string // the reference to push it to, if any
	Gzip bool
	// Images are OCI archives and registry references supplying the images.
	Images []string
	// Paths are manifest files and dirs of them.
	Paths []string
	// AllowSecretValues lets Secrets with values of their own in.
	AllowSecretValues bool
}

// CreateBundle reads the manifests of c.Paths as the file source does
// (refusing any it would refuse, with its file, field and reason), checks
// that every image they name is supplied and that no Secret carries values
// of its own, and writes (or pushes) the signed bundle.
func CreateBundle(ctx context.Context, c BundleCreate) (*bundle.Created, error) {
	files, err := readManifestPaths(c.Paths)
	if err != nil {
		return nil, err
	}
	refs, err := checkBundleFiles(files, c.AllowSecretValues)
	if err != nil {
		return nil, err
	}
	signer, err := LoadSigner(c.Key)
	if err != nil {
		return nil, err
	}
	opts := bundle.CreateOptions{Name: c.Name, Files: map[string][]byte{}, Sources: c.Images, Signer: signer,
		Remote: []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}}
	for n, f := range files {
		opts.Files[n] = f.data
	}
	for _, r := range refs {
		opts.Images = append(opts.Images, r.image)
	}
	tmpDir := os.TempDir()
	if c.Out != "" {
		tmpDir = filepath.Dir(c.Out)
	}
	created, err := bundle.Create(ctx, tmpDir, opts)
	if errors.Is(err, bundle.ErrMissingImage) {
		for _, r := range refs {
			if strings.Contains(err.Error(), "image "+r.image+":") {
				return nil, fmt.Errorf("%s: pod %s container %s: image %s: no --image supplies it (an OCI archive naming it, or its registry reference)",
					r.file, r.pod, r.container, r.image)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if c.Out != "" {
		if err := writeFileAtomic(c.Out, func(w io.Writer) error { return created.WriteTo(w, c.Gzip) }); err != nil {
			created.Close()
			return nil, err
		}
	}
	if c.Push != "" {
		ref, err := name.ParseReference(c.Push)
		if err != nil {
			created.Close()
			return nil, fmt.Errorf("--push %s: %w", c.Push, err)
		}
		if err := created.Push(ctx, ref, opts.Remote...); err != nil {
			created.Close()
			return nil, fmt.Errorf("push %s: %w", c.Push, err)
		}
	}
	return created, nil
}

// LoadSigner reads the private key at path; an encrypted cosign key's
// password is $COSIGN_PASSWORD, as cosign reads it.
func LoadSigner(path string) (*sign.Signer, error) {
	if path == "" {
		return nil, errors.New("--key is required: the private key that signs")
	}
	return sign.Load(path, []byte(os.Getenv("COSIGN_PASSWORD")))
}

// writeFileAtomic writes path through a temp file beside it, renamed over
// it once complete.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

type manifestFile struct {
	path string // as given, for messages
	data []byte
}

// readManifestPaths reads the manifest files of paths, by base name: a
// dir's files as the file source lists them (no subdirs; dot-files,
// backups and editor leftovers skipped).
func readManifestPaths(paths []string) (map[string]manifestFile, error) {
	files := map[string]manifestFile{}
	add := func(p string) error {
		base := filepath.Base(p)
		if prev, ok := files[base]; ok {
			return fmt.Errorf("%s and %s: one name in the bundle", prev.path, p)
		}
		if err := bundle.CheckFileName(base); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		data, err := atomicfile.Read(p, manifest.MaxSize)
		if err != nil {
			return err
		}
		files[base] = manifestFile{path: p, data: data}
		return nil
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if err := add(p); err != nil {
				return nil, err
			}
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if skip, _ := manifest.Skip(e.Name()); skip || !e.Type().IsRegular() {
				continue
			}
			if err := add(filepath.Join(p, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no manifest file in the paths given")
	}
	return files, nil
}

// imageUse is one container's image in a bundle's manifests.
type imageUse struct {
	file, pod, container, image string
}

// checkBundleFiles parses each file as the file source would and returns
// the images its containers name (each once, in order); a Secret with
// values of its own is refused unless allowSecretValues: a bundle is a
// file anyone holding it can read, and the node would keep it at rest.
func checkBundleFiles(files map[string]manifestFile, allowSecretValues bool) ([]imageUse, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var uses []imageUse
	var errs []error
	for _, n := range names {
		f := files[n]
		p := manifest.Check(f.data, manifest.SourceFile, f.path, bundleNode)
		if err := p.Err(); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range p.Objects {
			if o.Secret == nil || allowSecretValues {
				continue
			}
			for k := range o.Secret.Data {
				if _, ok := o.Credentials[k]; !ok {
					errs = append(errs, fmt.Errorf("%s: Secret %s/%s: key %s has a value written in the manifest: a bundle carries only credential references (annotation staticpodd.io/credentials), or give --allow-secret-values",
						f.path, o.Namespace(), o.Name(), k))
					break
				}
			}
		}
		for _, pod := range p.Pods {
			for _, c := range manifest.AllContainers(pod.Pod) {
				if !slices.ContainsFunc(uses, func(u imageUse) bool { return u.image == c.Image }) {
					uses = append(uses, imageUse{file: f.path, pod: strings.TrimSuffix(pod.Name, "-"+bundleNode), container: c.Name, image: c.Image})
				}
			}
		}
	}
	return uses, errors.Join(errs...)
}

// ApplyBundle applies the bundle at src (a file, an http(s) URL or an OCI
// reference) to the node of cfg: verified under cfg's image policy, its
// images imported into the store and pinned, its manifests checked as the
// file source will read them, and made the node's Current bundle.
func ApplyBundle(ctx context.Context, cfg *config.Config, src string, rollbackAfter time.Duration, logger *slog.Logger) (bundle.Record, error) {
	store, _, err := OpenImages(cfg, logger)
	if err != nil {
		return bundle.Record{}, err
	}
	return bundle.Apply(ctx, store, store.Policy(), src, cfg.RootDir, bundle.ApplyOptions{
		RollbackAfter: rollbackAfter,
		Check:         CheckBundle,
	})
}

// CheckBundle is bundle.ApplyOptions.Check: the manifests parse as the file
// source will parse them, and every image they name is one of the bundle's.
// Secrets with values are not refused here: create refuses them unless told
// to let them in, and the signature says the signer did.
func CheckBundle(md bundle.Metadata, files map[string][]byte) error {
	in := map[string]manifestFile{}
	for n, data := range files {
		in[n] = manifestFile{path: n, data: data}
	}
	uses, err := checkBundleFiles(in, true)
	if err != nil {
		return err
	}
	for _, u := range uses {
		if !slices.ContainsFunc(md.Images, func(i bundle.ImageRef) bool { return i.Ref == u.image }) {
			return fmt.Errorf("%s: pod %s container %s: image %s is not in the bundle", u.file, u.pod, u.container, u.image)
		}
	}
	return nil
}

// BundleStatus is `staticpodd bundle status`: state.json and the records
// of the bundles it names.
type BundleStatus struct {
	Current    *bundle.Record     `json:"current"`
	Previous   *bundle.Record     `json:"previous,omitempty"`
	Trial      time.Time          `json:"trial,omitzero"`
	RolledBack *bundle.RolledBack `json:"rolledBack,omitempty"`
}

// ReadBundleStatus reads the bundles of the node of rootDir.
func ReadBundleStatus(rootDir string) (BundleStatus, error) {
	st, err := bundle.ReadState(rootDir)
	if err != nil {
		return BundleStatus{}, err
	}
	out := BundleStatus{Trial: st.Trial, RolledBack: st.RolledBack}
	for _, x := range []struct {
		hex string
		rec **bundle.Record
	}{{st.Current, &out.Current}, {st.Previous, &out.Previous}} {
		if x.hex == "" {
			continue
		}
		r, err := bundle.ReadRecord(rootDir, x.hex)
		if err != nil {
			return out, err
		}
		*x.rec = &r
	}
	return out, nil
}

// WriteText writes s for `bundle status`.
func (s BundleStatus) WriteText(w io.Writer) {
	if s.Current == nil {
		fmt.Fprintln(w, "no bundle applied")
	}
	for _, r := range []struct {
		what string
		rec  *bundle.Record
	}{{"current", s.Current}, {"previous", s.Previous}} {
		if r.rec != nil {
			fmt.Fprintf(w, "%s: %s %s, %s, applied %s, %d manifests, %d images\n", r.what, r.rec.Name, r.rec.Digest,
				r.rec.Signer, r.rec.Applied.Format(time.RFC3339), len(r.rec.Manifests), len(r.rec.Images))
		}
	}
	if !s.Trial.IsZero() {
		fmt.Fprintf(w, "on trial since %s: not yet Ready\n", s.Trial.Format(time.RFC3339))
	}
	if rb := s.RolledBack; rb != nil {
		fmt.Fprintf(w, "rolled back %s at %s: %s\n", rb.Digest, rb.At.Format(time.RFC3339), rb.Reason)
	}
}

// WriteBundleApplied writes what `bundle apply` applied.
func WriteBundleApplied(w io.Writer, rec bundle.Record) {
	fmt.Fprintf(w, "applied bundle %s %s (%s)\n", rec.Name, rec.Digest, rec.Signer)
	for _, m := range rec.Manifests {
		fmt.Fprintf(w, "manifest %s\n", m)
	}
	for _, i := range rec.Images {
		fmt.Fprintf(w, "image %s@%s %s pinned\n", i.Ref, i.Digest, i.ID)
	}
}
