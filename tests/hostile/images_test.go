package hostile

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// importCase is one hostile archive given to `staticpodd images import`.
type importCase struct {
	name string
	// archive writes the archive (or OCI layout dir) into dir and returns its path.
	archive func(t *testing.T, c *canary, dir string) string
	// refused, when not empty, is a regexp the output of the failed import must
	// match besides naming the archive; the store must be byte-identical after.
	refused string
	// accepted, when refused is empty, checks what the import put in the store.
	accepted func(t *testing.T, c *canary, store string)
	// notHeld says how the product fails this case today; such a case runs
	// under not-held/ and is expected to fail until the product is fixed.
	notHeld string
}

// up climbs far enough from any layer or staging directory to reach "/".
var up = strings.Repeat("../", 40)

// TestHostileImages imports archives built to escape the store, each into a
// store that already holds an image. A refused import fails with a message
// naming the archive and the reason and leaves <root-dir>/images byte-identical;
// an accepted one keeps what it unpacks inside the store. Either way nothing
// outside the store changes: not the canary dir that absolute names, symlinks
// and hard links aim at, not the directories around the store that "../" names
// reach, and no device node appears outside it.
func TestHostileImages(t *testing.T) {
	t.Parallel()
	testroot.Require(t)
	seed := filepath.Join(t.TempDir(), "seed.tar")
	seedLayer := []entry{{name: "etc/", typ: tar.TypeDir, mode: 0o755}, {name: "etc/seed", body: "seed\n"}}
	writeDocker(t, seed, "seed:v1", imageOf(t, nil, nil, seedLayer))
	cases := append(append(layerCases(), archiveCases()...), corruptCases(seedLayer)...)
	for _, tc := range cases {
		t.Run(caseName(tc.name, tc.notHeld), func(t *testing.T) {
			t.Parallel()
			defer checkNotHeld(t, tc.notHeld)
			runImport(t, seed, tc)
		})
	}
}

func runImport(t *testing.T, seed string, tc importCase) {
	c := plantCanary(t)
	dir := t.TempDir()
	around := filepath.Dir(dir) // holds dir and the canary: what "../" names reach
	root := filepath.Join(dir, "root")
	store := filepath.Join(root, "images")
	if out, code := importCLI(t, root, seed); code != 0 {
		t.Fatalf("seed import failed (%d):\n%s", code, out)
	}
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	p := tc.archive(t, c, in)
	storeRel, _ := filepath.Rel(around, store)
	outsideBefore := tree(t, around, storeRel)
	storeBefore := treeStable(t, store, []string{"tmp"})

	out, code := importCLI(t, root, p)
	c.noSecret(t, "images import", out)
	if tc.refused != "" {
		if code == 0 {
			t.Errorf("import succeeded, want it refused (%s):\n%s", tc.refused, out)
		} else {
			if !strings.Contains(out, p) {
				t.Errorf("error does not name the archive %s:\n%s", p, out)
			}
			if !regexp.MustCompile(tc.refused).MatchString(out) {
				t.Errorf("error does not say %q:\n%s", tc.refused, out)
			}
		}
		if after := treeStable(t, store, []string{"tmp"}); after != storeBefore {
			t.Errorf("a refused import changed the store:\n%s", diffLines(storeBefore, after))
		}
	} else {
		if code != 0 {
			t.Fatalf("import failed (%d), want it accepted:\n%s", code, out)
		}
		if tc.accepted != nil {
			tc.accepted(t, c, store)
		}
	}
	if after := tree(t, around, storeRel); after != outsideBefore {
		t.Errorf("the import changed files outside the store:\n%s", diffLines(outsideBefore, after))
	}
	if devs := devicesUnder(t, around, store); len(devs) > 0 {
		t.Errorf("device nodes outside the store: %v", devs)
	}
	if entries, err := os.ReadDir(filepath.Join(store, "tmp")); err != nil || len(entries) > 0 {
		t.Errorf("staging left in the store's tmp/: %v %v", entries, err)
	}
	t.Logf("import output:\n%s", out)
}

// importCLI runs `staticpodd images import` and returns its output and exit code;
// an import still running after a minute is a hang and fails the test.
func importCLI(t *testing.T, root string, paths ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"images", "import", "--root-dir", root, "--run-dir", filepath.Join(root, "run")}, paths...)
	cmd := exec.CommandContext(ctx, testdaemon.Bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("images import hung for a minute:\n%s", out.String())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatal(err)
	return "", -1
}

// layer writes a docker-archive of one image whose only layer is entries.
func layer(entries ...entry) func(t *testing.T, c *canary, dir string) string {
	return func(t *testing.T, c *canary, dir string) string {
		p := filepath.Join(dir, "hostile.tar")
		dockerWithLayer(t, p, entries)
		return p
	}
}

// layerC is layer with entries that depend on the canary's place.
func layerC(f func(c *canary) []entry) func(t *testing.T, c *canary, dir string) string {
	return func(t *testing.T, c *canary, dir string) string {
		return layer(f(c)...)(t, c, dir)
	}
}

// inLayers finds rel in the store's layers: its path in the first layer that
// has it, or "" when none does.
func inLayers(t *testing.T, store, rel string) string {
	t.Helper()
	layers, err := os.ReadDir(filepath.Join(store, "layers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		p := filepath.Join(store, "layers", l.Name(), rel)
		if _, err := os.Lstat(p); err == nil {
			return p
		}
	}
	return ""
}

func mustLstat(t *testing.T, store, rel string) (string, unix.Stat_t) {
	t.Helper()
	p := inLayers(t, store, rel)
	if p == "" {
		t.Fatalf("%s is in no layer of the store", rel)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return p, st
}

// storeIsPrivate checks that host users other than root cannot reach the
// layers, which keep setuid files and device nodes as the image has them.
func storeIsPrivate(t *testing.T, store string) {
	t.Helper()
	fi, err := os.Stat(store)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("store %s is mode %v: host users could reach setuid files and device nodes of images", store, fi.Mode())
	}
}

func rootDevice(t *testing.T) (int64, int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		t.Fatal(err)
	}
	return int64(unix.Major(st.Dev)), int64(unix.Minor(st.Dev))
}

// layerCases are hostile layers: names that climb out, absolute names, symlinks
// and hard links that point out, devices, setuid files, hostile whiteouts.
func layerCases() []importCase {
	escapes := `escapes the layer root`
	throughLink := `is not a directory: refusing to write through it`
	return []importCase{
		{name: "slip/dotdot", archive: layer(entry{name: "../slip"}), refused: escapes},
		{name: "slip/to-around-the-store", archive: layer(entry{name: "../../../../../../../slip"}), refused: escapes},
		{name: "slip/deep-into-canary", archive: layerC(func(c *canary) []entry {
			return []entry{{name: up + c.Dir[1:] + "/slip"}}
		}), refused: escapes},
		{name: "slip/down-then-up", archive: layer(entry{name: "a/", typ: tar.TypeDir, mode: 0o755}, entry{name: "a/../../slip"}), refused: escapes},
		{name: "slip/dotdot-dir", archive: layer(entry{name: "../", typ: tar.TypeDir, mode: 0o755}), refused: escapes},
		{name: "slip/rooted-dotdot", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "/../../.." + c.Dir + "/slip"}}
		}), refused: escapes},
		{name: "slip/symlink-name", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "../link", typ: tar.TypeSymlink, link: c.Dir}}
		}), refused: escapes},
		{
			// Absolute names are taken relative to the layer root, as docker
			// and containerd do: the file lands inside the layer.
			name: "absolute/file",
			archive: layerC(func(c *canary) []entry {
				return []entry{{name: c.Dir + "/abs", body: "absolute\n"}}
			}),
			accepted: func(t *testing.T, c *canary, store string) {
				p, st := mustLstat(t, store, c.Dir[1:]+"/abs")
				if st.Mode&unix.S_IFMT != unix.S_IFREG || !strings.HasPrefix(p, store+"/layers/") {
					t.Errorf("absolute name unpacked as %s mode %o, want a file inside the layer", p, st.Mode)
				}
			},
		},
		{name: "symlink/absolute-then-file", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}, {name: "esc/pwned", body: "pwned\n"}}
		}), refused: throughLink},
		{name: "symlink/relative-then-file", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "esc", typ: tar.TypeSymlink, link: strings.TrimSuffix(up, "/")}, {name: "esc" + c.Dir + "/pwned", body: "pwned\n"}}
		}), refused: throughLink},
		{name: "symlink/to-root-then-dir", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "esc", typ: tar.TypeSymlink, link: "/"}, {name: "esc" + c.Dir + "/newdir/", typ: tar.TypeDir, mode: 0o755}}
		}), refused: throughLink},
		{name: "symlink/chain-then-file", archive: layerC(func(c *canary) []entry {
			return []entry{
				{name: "a", typ: tar.TypeSymlink, link: "b"},
				{name: "b", typ: tar.TypeSymlink, link: c.Dir},
				{name: "a/pwned", body: "pwned\n"},
			}
		}), refused: throughLink},
		{name: "symlink/replaces-a-dir-then-file", archive: layerC(func(c *canary) []entry {
			return []entry{
				{name: "d/", typ: tar.TypeDir, mode: 0o755},
				{name: "d/x", body: "x\n"},
				{name: "d", typ: tar.TypeSymlink, link: c.Dir},
				{name: "d/pwned", body: "pwned\n"},
			}
		}), refused: throughLink},
		{name: "symlink/then-whiteout-through-it", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}, {name: "esc/.wh.victim"}}
		}), refused: throughLink},
		{name: "symlink/then-opaque-through-it", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}, {name: "esc/.wh..wh..opq"}}
		}), refused: throughLink},
		{
			// A file entry over a symlink replaces the symlink; it does not
			// write to its target.
			name: "symlink/then-file-of-the-same-name",
			archive: layerC(func(c *canary) []entry {
				return []entry{{name: "v", typ: tar.TypeSymlink, link: c.Victim}, {name: "v", body: "replaced\n"}}
			}),
			accepted: func(t *testing.T, c *canary, store string) {
				if _, st := mustLstat(t, store, "v"); st.Mode&unix.S_IFMT != unix.S_IFREG {
					t.Errorf("v is mode %o, want the regular file that replaced the symlink", st.Mode)
				}
			},
		},
		{
			name: "symlink/then-dir-of-the-same-name",
			archive: layerC(func(c *canary) []entry {
				return []entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}, {name: "esc/", typ: tar.TypeDir, mode: 0o755}, {name: "esc/pwned", body: "inside\n"}}
			}),
			accepted: func(t *testing.T, c *canary, store string) {
				if _, st := mustLstat(t, store, "esc"); st.Mode&unix.S_IFMT != unix.S_IFDIR {
					t.Errorf("esc is mode %o, want the directory that replaced the symlink", st.Mode)
				}
				mustLstat(t, store, "esc/pwned")
			},
		},
		{
			// Layers are unpacked each into its own directory: a symlink of a
			// lower layer is not there to write through.
			name: "symlink/in-lower-layer-file-in-upper",
			archive: func(t *testing.T, c *canary, dir string) string {
				p := filepath.Join(dir, "hostile.tar")
				writeDocker(t, p, "hostile:v1", imageOf(t, nil, nil,
					[]entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}},
					[]entry{{name: "esc/pwned", body: "pwned\n"}}))
				return p
			},
			accepted: func(t *testing.T, c *canary, store string) {
				p, st := mustLstat(t, store, "esc/pwned")
				if st.Mode&unix.S_IFMT != unix.S_IFREG || !strings.HasPrefix(p, store+"/layers/") {
					t.Errorf("esc/pwned unpacked as %s mode %o, want a file inside the upper layer", p, st.Mode)
				}
			},
		},
		{name: "hardlink/absolute-host-path", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "h", typ: tar.TypeLink, link: c.Victim}}
		}), refused: `hard link target .*no such file`},
		{name: "hardlink/dotdot-to-host", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "h", typ: tar.TypeLink, link: up + c.Victim[1:]}}
		}), refused: escapes},
		{name: "hardlink/through-symlinked-parent", archive: layerC(func(c *canary) []entry {
			return []entry{{name: "d", typ: tar.TypeSymlink, link: c.Dir}, {name: "h", typ: tar.TypeLink, link: "d/victim"}}
		}), refused: `hard link target d/victim: parent d is not a directory`},
		{name: "hardlink/to-layer-root", archive: layer(entry{name: "h", typ: tar.TypeLink, link: "./"}), refused: `hard link to the layer root`},
		{name: "hardlink/to-directory", archive: layer(entry{name: "d/", typ: tar.TypeDir, mode: 0o755}, entry{name: "h", typ: tar.TypeLink, link: "d"}), refused: `is a directory`},
		{
			// A hard link to a symlink links the symlink itself, never its target.
			name: "hardlink/to-symlink-pointing-out",
			archive: layerC(func(c *canary) []entry {
				return []entry{{name: "s", typ: tar.TypeSymlink, link: c.Victim}, {name: "h", typ: tar.TypeLink, link: "s"}}
			}),
			accepted: func(t *testing.T, c *canary, store string) {
				if _, st := mustLstat(t, store, "h"); st.Mode&unix.S_IFMT != unix.S_IFLNK {
					t.Errorf("h is mode %o, want a link to the symlink s", st.Mode)
				}
			},
		},
		{
			// Device nodes and FIFOs are kept, as every image store does; they
			// live only under the store, which host users cannot reach, and a
			// container's devices cgroup decides whether it may open them (see
			// TestHostileImageContent).
			name: "device/char-block-fifo",
			archive: func(t *testing.T, c *canary, dir string) string {
				major, minor := rootDevice(t)
				return layer(
					entry{name: "dev/", typ: tar.TypeDir, mode: 0o755},
					entry{name: "dev/mem", typ: tar.TypeChar, mode: 0o666, major: 1, minor: 1},
					entry{name: "dev/hostdisk", typ: tar.TypeBlock, mode: 0o666, major: major, minor: minor},
					entry{name: "dev/fifo", typ: tar.TypeFifo, mode: 0o666},
				)(t, c, dir)
			},
			accepted: func(t *testing.T, c *canary, store string) {
				_, st := mustLstat(t, store, "dev/mem")
				if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 1) {
					t.Errorf("dev/mem: mode %o rdev %d", st.Mode, st.Rdev)
				}
				major, minor := rootDevice(t)
				if _, st := mustLstat(t, store, "dev/hostdisk"); st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != unix.Mkdev(uint32(major), uint32(minor)) {
					t.Errorf("dev/hostdisk: mode %o rdev %d", st.Mode, st.Rdev)
				}
				storeIsPrivate(t, store)
			},
		},
		{
			// Ownership and the setuid, setgid and sticky bits are kept, as the
			// image has them (docker does the same); the store is root's alone.
			name: "setuid/kept-as-in-the-image",
			archive: layer(
				entry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
				entry{name: "bin/su", body: "#!/bin/sh\n", mode: 0o4755},
				entry{name: "bin/wall", body: "#!/bin/sh\n", mode: 0o2755, gid: 5},
				entry{name: "bin/mine", body: "#!/bin/sh\n", mode: 0o6750, uid: 1000, gid: 1000},
				entry{name: "bin/typebits", body: "#!/bin/sh\n", mode: 0o100755 | 0o4000},
				entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
			),
			accepted: func(t *testing.T, c *canary, store string) {
				for rel, want := range map[string][3]uint32{
					"bin/su": {0o4755, 0, 0}, "bin/wall": {0o2755, 0, 5}, "bin/mine": {0o6750, 1000, 1000},
					"bin/typebits": {0o4755, 0, 0}, "tmp": {0o1777, 0, 0},
				} {
					_, st := mustLstat(t, store, rel)
					if st.Mode&0o7777 != want[0] || st.Uid != want[1] || st.Gid != want[2] {
						t.Errorf("%s: mode %o owner %d:%d, want %o %d:%d", rel, st.Mode&0o7777, st.Uid, st.Gid, want[0], want[1], want[2])
					}
				}
				storeIsPrivate(t, store)
			},
		},
		// Whiteouts name a file to hide; "." and ".." are not files of the
		// layer (docs/security.md, "A bad image is refused with a clear error
		// and changes nothing": whiteouts must name a file of the layer).
		{
			name: "whiteout/of-dot", archive: layer(entry{name: "keep", body: "k\n"}, entry{name: ".wh.."}), refused: `entry \.wh\.\.:`,
		},
		{
			name: "whiteout/of-dotdot", archive: layer(entry{name: "keep", body: "k\n"}, entry{name: ".wh..."}), refused: `entry \.wh\.\.\.:`,
		},
		{
			name: "whiteout/of-dotdot-in-subdir", archive: layer(entry{name: "a/", typ: tar.TypeDir, mode: 0o755}, entry{name: "a/.wh..."}), refused: `entry a/\.wh\.\.\.:`,
		},
		{name: "entry/dot-as-file", archive: layer(entry{name: ".", body: "x"}), refused: `entry \.: .*(file exists|names the layer root)`},
	}
}

// archiveCases attack the archive around the layers: OCI layout entries that
// climb out, symlinked blobs, "../" in digests and in manifest.json paths.
func archiveCases() []importCase {
	layoutEscapes := `escapes the layout`
	ociArchive := func(extra func(c *canary) []entry) func(t *testing.T, c *canary, dir string) string {
		return func(t *testing.T, c *canary, dir string) string {
			lay := filepath.Join(dir, "layout")
			writeLayoutDir(t, lay, "hostile:v1", imageOf(t, nil, nil, []entry{{name: "f", body: "f\n"}}))
			p := filepath.Join(dir, "hostile.oci.tar")
			tarDir(t, lay, p, extra(c)...)
			return p
		}
	}
	// layoutEdit writes an OCI layout and lets edit change it; the result is
	// imported as a directory, or as a tar of it when asTar.
	layoutEdit := func(asTar bool, edit func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest)) func(t *testing.T, c *canary, dir string) string {
		return func(t *testing.T, c *canary, dir string) string {
			lay := filepath.Join(dir, "layout")
			writeLayoutDir(t, lay, "hostile:v1", imageOf(t, nil, nil, []entry{{name: "f", body: "f\n"}}))
			var idx v1.IndexManifest
			readJSON(t, filepath.Join(lay, "index.json"), &idx)
			var m v1.Manifest
			readJSON(t, blobPath(lay, idx.Manifests[0].Digest), &m)
			edit(t, c, lay, &m, &idx)
			if !asTar {
				return lay
			}
			p := filepath.Join(dir, "hostile.oci.tar")
			tarDir(t, lay, p)
			return p
		}
	}
	symlinkBlob := func(which string) func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest) {
		return func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest) {
			h := m.Config.Digest
			if which == "manifest" {
				h = idx.Manifests[0].Digest
			}
			if err := os.Remove(blobPath(lay, h)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.Secret, blobPath(lay, h)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return []importCase{
		{name: "oci-archive/dotdot-entry", archive: ociArchive(func(c *canary) []entry {
			return []entry{{name: "../../../../../../../slip", body: "slip\n"}}
		}), refused: layoutEscapes},
		{name: "oci-archive/deep-entry-into-canary", archive: ociArchive(func(c *canary) []entry {
			return []entry{{name: up + c.Dir[1:] + "/slip", body: "slip\n"}}
		}), refused: layoutEscapes},
		{name: "oci-archive/absolute-entry", archive: ociArchive(func(c *canary) []entry {
			return []entry{{name: c.Dir + "/abs", body: "abs\n"}}
		}), refused: layoutEscapes},
		// Symlinks and hard links in an OCI archive are not extracted: the
		// file lands in the staged layout, the import goes on.
		{name: "oci-archive/symlink-then-file-through-it", archive: ociArchive(func(c *canary) []entry {
			return []entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}, {name: "esc/pwned", body: "pwned\n"}}
		})},
		{name: "oci-archive/hardlink-to-host-file", archive: ociArchive(func(c *canary) []entry {
			return []entry{{name: "blobs/h", typ: tar.TypeLink, link: c.Victim}}
		})},
		{
			// A symlinked blob in an archive is not extracted: the blob is missing.
			name: "oci-archive/config-blob-is-symlink-to-secret",
			archive: func(t *testing.T, c *canary, dir string) string {
				lay := filepath.Join(dir, "layout")
				writeLayoutDir(t, lay, "hostile:v1", imageOf(t, nil, nil, []entry{{name: "f", body: "f\n"}}))
				var idx v1.IndexManifest
				readJSON(t, filepath.Join(lay, "index.json"), &idx)
				var m v1.Manifest
				readJSON(t, blobPath(lay, idx.Manifests[0].Digest), &m)
				cfg, _ := filepath.Rel(lay, blobPath(lay, m.Config.Digest))
				if err := os.Remove(blobPath(lay, m.Config.Digest)); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, "hostile.oci.tar")
				tarDir(t, lay, p, entry{name: cfg, typ: tar.TypeSymlink, link: c.Secret})
				return p
			},
			refused: `no such file`,
		},
		{name: "oci-dir/config-blob-is-symlink-to-secret", archive: layoutEdit(false, symlinkBlob("config")), refused: `is a symlink`},
		{name: "oci-dir/manifest-blob-is-symlink-to-secret", archive: layoutEdit(false, symlinkBlob("manifest")), refused: `is a symlink`},
		{name: "oci-dir/index-json-is-symlink-to-secret", archive: layoutEdit(false, func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest) {
			if err := os.Remove(filepath.Join(lay, "index.json")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.Secret, filepath.Join(lay, "index.json")); err != nil {
				t.Fatal(err)
			}
		}), refused: `index`},
		{name: "oci/index-digest-dotdot", archive: layoutEdit(true, func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest) {
			var raw map[string]any
			readJSON(t, filepath.Join(lay, "index.json"), &raw)
			raw["manifests"].([]any)[0].(map[string]any)["digest"] = "sha256:" + up + c.Secret[1:]
			writeJSON(t, filepath.Join(lay, "index.json"), raw)
		}), refused: `index`},
		{name: "oci/layer-digest-dotdot", archive: layoutEdit(true, func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest) {
			var raw map[string]any
			readJSON(t, blobPath(lay, idx.Manifests[0].Digest), &raw)
			raw["layers"].([]any)[0].(map[string]any)["digest"] = "sha256:../../../../" + strings.Repeat("a", 52)
			b := mustJSON(t, raw)
			h := v1.Hash{Algorithm: "sha256", Hex: sha(b)}
			write(t, blobPath(lay, h), string(b), 0o644)
			idx.Manifests[0].Digest, idx.Manifests[0].Size = h, int64(len(b))
			writeJSON(t, filepath.Join(lay, "index.json"), idx)
		}), refused: `manifest`},
		{name: "oci/manifest-content-does-not-match-digest", archive: layoutEdit(true, func(t *testing.T, c *canary, lay string, m *v1.Manifest, idx *v1.IndexManifest) {
			p := blobPath(lay, idx.Manifests[0].Digest)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			write(t, p, string(b)+" ", 0o644)
		}), refused: `corrupt archive`},
		{name: "docker/config-path-dotdot-to-host", archive: func(t *testing.T, c *canary, dir string) string {
			data := tarOf(t, []entry{{name: "f", body: "f\n"}})
			p := filepath.Join(dir, "hostile.tar")
			handDocker{config: configFor(t, "sha256:"+sha(data)), configName: up + c.Secret[1:], layers: []handLayer{{data: data}}}.write(t, p)
			// Take the config out of the archive: only the host has that path.
			rewriteTar(t, p, func(e entry) bool { return e.name != up+c.Secret[1:] })
			return p
		}, refused: `manifest\.json|not found|no such file`},
		{
			// A layer named by an absolute host path that holds a good layer:
			// the archive must be the only thing read.
			name: "docker/layer-path-absolute-to-host",
			archive: func(t *testing.T, c *canary, dir string) string {
				data := tarOf(t, []entry{{name: "from-the-host", body: "host\n"}})
				hostLayer := filepath.Join(c.Dir, "sub", "layer.tar")
				write(t, hostLayer, string(data), 0o644)
				c.before = tree(t, c.Dir)
				p := filepath.Join(dir, "hostile.tar")
				handDocker{config: configFor(t, "sha256:"+sha(data)), layers: []handLayer{{name: hostLayer, file: "unrelated", data: []byte("x")}}}.write(t, p)
				return p
			},
			refused: `not found|no such file|not in the archive`,
		},
		{
			// Names in manifest.json are keys into the archive, never host paths:
			// "../" in them finds the archive entry of that name, nothing else.
			name: "docker/layer-path-dotdot-inside-archive",
			archive: func(t *testing.T, c *canary, dir string) string {
				data := tarOf(t, []entry{{name: "f", body: "f\n"}})
				p := filepath.Join(dir, "hostile.tar")
				handDocker{config: configFor(t, "sha256:"+sha(data)), layers: []handLayer{{name: "../../../../layer.tar", data: data}}}.write(t, p)
				return p
			},
			accepted: func(t *testing.T, c *canary, store string) { mustLstat(t, store, "f") },
		},
		{
			name: "docker/repotag-dotdot",
			archive: func(t *testing.T, c *canary, dir string) string {
				data := tarOf(t, []entry{{name: "f", body: "f\n"}})
				p := filepath.Join(dir, "hostile.tar")
				handDocker{config: configFor(t, "sha256:"+sha(data)), layers: []handLayer{{data: data}}, repoTag: "../../../../etc:passwd"}.write(t, p)
				return p
			},
			refused: `reference|tag`,
		},
	}
}

// corruptCases are archives that are damaged or lie about digests.
func corruptCases(seedLayer []entry) []importCase {
	corrupt := `corrupt archive`
	good := func(t *testing.T) []byte {
		p := filepath.Join(t.TempDir(), "good.tar")
		dockerWithLayer(t, p, []entry{{name: "big", body: strings.Repeat("0123456789abcdef", 16<<10)}})
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	file := func(name string, content func(t *testing.T) []byte) func(t *testing.T, c *canary, dir string) string {
		return func(t *testing.T, c *canary, dir string) string {
			p := filepath.Join(dir, name)
			write(t, p, string(content(t)), 0o644)
			return p
		}
	}
	return []importCase{
		{name: "corrupt/truncated-tar", archive: file("half.tar", func(t *testing.T) []byte { b := good(t); return b[:len(b)/2] }), refused: `truncated|unexpected EOF`},
		{name: "corrupt/truncated-gzip", archive: file("half.tar.gz", func(t *testing.T) []byte { b := gz(t, good(t)); return b[:len(b)*2/3] }), refused: `truncated|unexpected EOF`},
		{name: "corrupt/truncated-zstd", archive: file("half.tar.zst", func(t *testing.T) []byte { b := zst(t, good(t)); return b[:len(b)*2/3] }), refused: `truncated|unexpected EOF`},
		{name: "corrupt/empty-file", archive: file("empty.tar", func(t *testing.T) []byte { return nil }), refused: `empty or not a tar`},
		{name: "corrupt/not-an-archive", archive: file("garbage.tar", func(t *testing.T) []byte { return []byte("this is not an archive\n") }), refused: `not a tar|truncated|unexpected EOF`},
		{name: "corrupt/gzip-of-garbage", archive: file("garbage.tar.gz", func(t *testing.T) []byte { return gz(t, []byte(strings.Repeat("garbage ", 1000))) }), refused: `not a tar|truncated|unexpected EOF|invalid`},
		{name: "corrupt/tar-without-images", archive: file("dirs.tar", func(t *testing.T) []byte {
			return tarOf(t, []entry{{name: "etc/", typ: tar.TypeDir, mode: 0o755}, {name: "etc/hosts", body: "127.0.0.1 x\n"}})
		}), refused: `not an OCI archive or docker-archive`},
		{name: "corrupt/flipped-layer-byte", archive: file("flipped.tar", func(t *testing.T) []byte {
			b := good(t)
			i := bytes.Index(b, []byte("0123456789abcdef0123456789abcdef"))
			b[i+100] ^= 0xff
			return b
		}), refused: corrupt},
		{name: "wrong-digest/diff-id", archive: func(t *testing.T, c *canary, dir string) string {
			data := tarOf(t, []entry{{name: "f", body: "f\n"}})
			p := filepath.Join(dir, "hostile.tar")
			handDocker{config: configFor(t, "sha256:"+sha([]byte("other content"))), layers: []handLayer{{data: data}}}.write(t, p)
			return p
		}, refused: corrupt},
		{name: "wrong-digest/config-name", archive: func(t *testing.T, c *canary, dir string) string {
			data := tarOf(t, []entry{{name: "f", body: "f\n"}})
			p := filepath.Join(dir, "hostile.tar")
			handDocker{config: configFor(t, "sha256:"+sha(data)), configName: sha([]byte("not the config")) + ".json", layers: []handLayer{{data: data}}}.write(t, p)
			return p
		}, refused: corrupt},
		{
			// A config naming a layer the store already has: the store's layer is
			// used and the archive's (hostile) content for it is never unpacked.
			name: "wrong-digest/diff-id-of-a-stored-layer",
			archive: func(t *testing.T, c *canary, dir string) string {
				stored := tarOf(t, seedLayer)
				hostile := tarOf(t, []entry{{name: up + c.Dir[1:] + "/slip", body: "slip\n"}})
				p := filepath.Join(dir, "hostile.tar")
				handDocker{config: configFor(t, "sha256:"+sha(stored)), layers: []handLayer{{data: hostile}}}.write(t, p)
				return p
			},
			accepted: func(t *testing.T, c *canary, store string) {
				layers, err := os.ReadDir(filepath.Join(store, "layers"))
				if err != nil || len(layers) != 1 {
					t.Errorf("layers %v (%v), want only the seed's", layers, err)
				}
			},
		},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rewriteTar keeps the entries of the tar at p that keep says to keep.
func rewriteTar(t *testing.T, p string, keep func(entry) bool) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []entry
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		var body bytes.Buffer
		body.ReadFrom(tr)
		e := entry{name: hdr.Name, body: body.String(), typ: hdr.Typeflag, link: hdr.Linkname, mode: hdr.Mode}
		if keep(e) {
			out = append(out, e)
		}
	}
	writeTar(t, p, out)
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zst(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
