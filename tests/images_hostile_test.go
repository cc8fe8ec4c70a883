package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tarFile is one entry of a hand-made tar.
type tarFile struct {
	name string
	body []byte
	typ  byte
}

func makeTar(t *testing.T, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		typ := f.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: f.name, Typeflag: typ, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(1700000000, 0)}
		if typ == tar.TypeDir {
			hdr.Mode, hdr.Size = 0o755, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// dockerArchive is a `docker save` tarball of one image, tagged tag, whose
// layers are the given uncompressed tars: what an attacker would hand over.
func dockerArchive(t *testing.T, tag string, layers ...[]byte) []byte {
	t.Helper()
	var diffIDs, files []string
	var entries []tarFile
	for i, l := range layers {
		diffIDs = append(diffIDs, "sha256:"+sha256Hex(l))
		name := fmt.Sprintf("%d/layer.tar", i)
		files = append(files, name)
		entries = append(entries, tarFile{name: name, body: l})
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Cmd": []string{"sh"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		t.Fatal(err)
	}
	configName := sha256Hex(config) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{tag}, "Layers": files}})
	if err != nil {
		t.Fatal(err)
	}
	entries = append(entries, tarFile{name: configName, body: config}, tarFile{name: "manifest.json", body: manifest})
	return makeTar(t, entries)
}

// storeDigest describes every file under dir (path, mode, size, mtime, content
// hash), leaving out the staging dir's own mtime.
func storeDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The daemon's atomic replacement of a record (a temporary file
		// renamed over it) may take the temporary file away between the
		// listing and its stat or read: it is left out either way.
		gone := func(err error) bool {
			return errors.Is(err, fs.ErrNotExist) && strings.Contains(e.Name(), ".tmp-")
		}
		fi, err := e.Info()
		if gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		mtime := fi.ModTime().UnixNano()
		if rel == "tmp" {
			mtime = 0
		}
		fmt.Fprintf(&b, "%s %v %d %d", rel, fi.Mode(), fi.Size(), mtime)
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if gone(err) {
				b.WriteString(" gone\n")
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %s", sha256Hex(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Archives that try to leave the store, or name images with references docker's
// grammar refuses, and references like that on the command line or in a pod, are
// refused saying why, and the store is left as it was.
func TestImagesRefuseHostileInput(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	store := filepath.Join(d.RootDir, "images")
	want := storeDigest(t, store)
	good := makeTar(t, []tarFile{{name: "etc/", typ: tar.TypeDir}, {name: "etc/hostname", body: []byte("x\n")}})
	for _, c := range []struct {
		name  string
		tar   []byte
		wants []string
	}{
		{"escape.tar", dockerArchive(t, "evil:v1", good, makeTar(t, []tarFile{{name: ".wh..."}})), []string{"entry .wh...: whiteout of \"..\""}},
		{"root.tar", dockerArchive(t, "evil:v1", makeTar(t, []tarFile{{name: ".wh.."}})), []string{"entry .wh..: whiteout of \".\""}},
		{"opaque.tar", dockerArchive(t, "evil:v1", makeTar(t, []tarFile{{name: ".wh..wh..opq"}})), []string{"opaque whiteout at the layer root"}},
		{"climb.tar", dockerArchive(t, "evil:v1", makeTar(t, []tarFile{{name: "../../x", body: []byte("x")}})), []string{"escapes the layer root"}},
		{"badref.tar", dockerArchive(t, "../../etc:x", good), []string{`RepoTags[0]: invalid image reference "../../etc:x"`}},
	} {
		p := filepath.Join(d.Dir, c.name)
		if err := os.WriteFile(p, c.tar, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := d.CLIErr("images", "import", p)
		if err == nil {
			t.Errorf("images import %s succeeded:\n%s", c.name, out)
		}
		for _, w := range append(c.wants, p) {
			if !strings.Contains(out, w) {
				t.Errorf("images import %s says %q, want it to say %q", c.name, out, w)
			}
		}
		if got := storeDigest(t, store); got != want {
			t.Errorf("images import %s changed the store:\n%s\nwant\n%s", c.name, got, want)
		}
	}

	if out, err := d.CLIErr("images", "rm", "../../etc:x"); err == nil || !strings.Contains(out, `invalid image reference "../../etc:x"`) {
		t.Errorf("images rm ../../etc:x: %v\n%s", err, out)
	}
	if out := d.CLI("images", "ls"); !strings.Contains(out, "docker.io/library/busybox:latest") || strings.Contains(out, "evil") || strings.Contains(out, "etc") {
		t.Errorf("images ls after the hostile imports:\n%s", out)
	}

	manifest := filepath.Join(d.Dir, "climb.yaml")
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: climb}\nspec:\n  containers: [{name: c, image: '../../etc:x'}]\n"
	if err := os.WriteFile(manifest, []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testdaemon.Bin, "validate", manifest).CombinedOutput()
	if err == nil || !strings.Contains(string(out), manifest+`: spec.containers[0].image: Invalid value: "../../etc:x": not an image reference: registry ".."`) {
		t.Errorf("validate of a pod with image ../../etc:x: %v\n%s", err, out)
	}
}

// gzipBomb is a docker-archive of a few MB whose gzip wraps a 4 GiB first entry.
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	member := func(b []byte) {
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var hdr bytes.Buffer
	if err := tar.NewWriter(&hdr).WriteHeader(&tar.Header{Name: "junk", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4 << 30}); err != nil {
		t.Fatal(err)
	}
	member(hdr.Bytes())
	zeros := make([]byte, 64<<20)
	start := buf.Len()
	member(zeros)
	one := slicesClone(buf.Bytes()[start:])
	for range 4<<30/len(zeros) - 1 {
		buf.Write(one)
	}
	member(dockerArchive(t, "bomb:v1", makeTar(t, []tarFile{{name: "x", body: []byte("x")}})))
	return buf.Bytes()
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// images import leaves the reserve free on the store's filesystem: 15% by
// default, 100 - imageGCHighThresholdPercent with --config. A gzip bomb is
// stopped there, quickly, with the store unchanged.
func TestImagesImportKeepsReserve(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	root := filepath.Join(d.Dir, "small")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	cli := func(args ...string) (string, error) {
		out, err := exec.Command(testdaemon.Bin, append(args, "--root-dir", root)...).CombinedOutput()
		return string(out), err
	}
	if out, err := cli("images", "import", testdaemon.Image); err != nil {
		t.Fatalf("import busybox: %v\n%s", err, out)
	}
	bomb := filepath.Join(d.Dir, "bomb.tar.gz")
	if err := os.WriteFile(bomb, gzipBomb(t), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(d.Dir, "half.yaml")
	half := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 40\n"
	if err := os.WriteFile(config, []byte(half), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(root, "images")
	want := storeDigest(t, store)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "less than 15% (9.6MiB) of the filesystem of " + store + " free: stopped after writing"},
		{[]string{"--config", config}, "less than 50% (32.0MiB) of the filesystem of " + store + " free: stopped after writing"},
	} {
		start := time.Now()
		out, err := cli(append([]string{"images", "import", bomb}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) || !strings.Contains(out, bomb) {
			t.Errorf("images import %v of a gzip bomb: %v\n%s\nwant it to say %q", c.args, err, out, c.want)
		}
		t.Logf("images import %v failed after %v: %s", c.args, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
		if got := storeDigest(t, store); got != want {
			t.Errorf("images import %v changed the store:\n%s\nwant\n%s", c.args, got, want)
		}
	}
}

// A hostile archive dropped into the import folder of a running daemon is
// refused with its reason in the log; the running pod and the store's images
// and layers are untouched.
func TestImportFolderRefusesHostileArchive(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	before := d.WaitRunning("web", 30*time.Second)
	store := filepath.Join(d.RootDir, "images")
	digest := func() string {
		var keep []string
		for _, l := range strings.Split(storeDigest(t, store), "\n") {
			// The folder, the watcher's record of what it tried (and the
			// temporary file its atomic replacement writes first), and the
			// store root's mtime, which that record's replacement changes.
			if !strings.HasPrefix(l, "import") && !strings.HasPrefix(l, ".import-state.json.tmp-") &&
				!strings.HasPrefix(l, ". ") && !strings.HasPrefix(l, "snapshots") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	want := digest()
	evil := dockerArchive(t, "evil:v1", makeTar(t, []tarFile{{name: "etc/", typ: tar.TypeDir}}), makeTar(t, []tarFile{{name: ".wh..."}}))
	tmp := filepath.Join(d.Dir, "evil.tar")
	if err := os.WriteFile(tmp, evil, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(store, "import", "evil.tar")
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	d.WaitOutput(20*time.Second, "the import failure logged", func(out string) bool {
		return strings.Contains(out, "image import failed") && strings.Contains(out, `entry .wh...: whiteout of \"..\"`)
	})
	if got := digest(); got != want {
		t.Errorf("the store changed:\n%s\nwant\n%s", got, want)
	}
	after := d.WaitRunning("web", 5*time.Second)
	if a, b := after.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != b.RestartCount {
		t.Errorf("web's container changed: %s/%d, was %s/%d", a.ContainerID, a.RestartCount, b.ContainerID, b.RestartCount)
	}
	if out := d.CLI("images", "ls"); strings.Contains(out, "evil") {
		t.Errorf("images ls shows the hostile image:\n%s", out)
	}
}
