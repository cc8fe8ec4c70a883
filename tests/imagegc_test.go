package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// usingPod is a sleeper pod of image.
func usingPod(name, image string) string {
	return strings.Replace(sleeper(name, ""), "image: busybox", "image: "+image, 1)
}

// statfsSize is the size in bytes of the filesystem holding dir.
func statfsSize(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Bsize
}

// hasImage says whether `images ls` lists ref.
func hasImage(d *daemon, ref string) bool {
	return strings.Contains(d.CLI("images", "ls"), ref+" ")
}

// Image garbage collection on a small real filesystem filled past
// imageGCHighThresholdPercent: asked for by a reload, it removes unused images
// least recently used first, only as many as bring usage to
// imageGCLowThresholdPercent, and never the image of a running pod, of a pod
// whose manifest is there while its pod is down, a pinned one or one whose
// archive is in the import folder. Not reaching the low threshold is a
// FreeDiskSpaceFailed event. No pod is restarted by any of it.
func TestImageGCLoopFS(t *testing.T) {
	t.Parallel()
	mnt := filepath.Join(t.TempDir(), "disk")
	testroot.LoopFS(t, mnt, 256<<20)
	d := newDaemon(t)
	d.RootDir = filepath.Join(mnt, "root")
	importDir := filepath.Join(d.RootDir, "images", "import")
	os.MkdirAll(importDir, 0o700)
	b, _ := os.ReadFile(d.Config)
	os.WriteFile(d.Config, append(b, []byte(`imageGCHighThresholdPercent: 60
imageGCLowThresholdPercent: 55
imageMinimumGCAge: 1s
`)...), 0o644)
	d.CLI("images", "import", testdaemon.Image)
	const mib = 1 << 20
	for name, pad := range map[string]int{"lru1": 16 * mib, "lru2": 16 * mib, "down": 16 * mib, "pinned": 16 * mib} {
		p := filepath.Join(d.Dir, name+".tar")
		buildImage(t, p, "-ref", "example.com/"+name+":v1", "-pad", strconv.Itoa(pad))
		d.CLI("images", "import", p)
	}
	buildImage(t, filepath.Join(importDir, "folder.tar"), "-ref", "example.com/folder:v1", "-pad", strconv.Itoa(16*mib))
	if out := d.CLI("images", "pin", "example.com/pinned:v1"); !strings.Contains(out, "pinned") {
		t.Fatalf("images pin: %q", out)
	}
	if out := d.CLI("images", "ls"); !strings.Contains(out, "PINNED") || !strings.Contains(out, "pinned") {
		t.Fatalf("images ls does not show the pin:\n%s", out)
	}
	d.Start()
	d.Eventually(30*time.Second, "folder imported", func() error {
		if !hasImage(d, "example.com/folder:v1") {
			return errors.New("not yet")
		}
		return nil
	})
	// lru1 used, then lru2: lru1 is the least recently used.
	for _, name := range []string{"lru1", "lru2"} {
		d.WriteManifest(name+".yaml", usingPod(name, "example.com/"+name+":v1"))
		d.WaitRunning(name, 60*time.Second)
		d.RemoveManifest(name + ".yaml")
		d.Eventually(30*time.Second, name+" gone", func() error {
			if d.Pod(name) != nil {
				return errStill
			}
			return nil
		})
	}
	d.WriteManifest("run.yaml", sleeper("run", ""))
	d.WriteManifest("down.yaml", `apiVersion: v1
kind: Pod
metadata: {name: down}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: example.com/down:v1
    command: ["true"]
`)
	run := d.WaitRunning("run", 60*time.Second)
	d.Eventually(60*time.Second, "down succeeded", func() error {
		if p := d.Pod("down"); p == nil || p.Status.Phase != v1.PodSucceeded {
			return errors.New("not yet")
		}
		return nil
	})
	if ls := d.CLI("images", "ls"); strings.Contains(strings.SplitN(ls[strings.Index(ls, "example.com/lru1:v1"):], "\n", 2)[0], "never") {
		t.Errorf("images ls shows lru1, which a pod used, as never used:\n%s", ls)
	}

	// Usage to 80%: freeing down to 55% wants 25% of 256MiB (64MiB), more
	// than the unused lru1 and lru2 hold: both go, nothing else, and the
	// collector says it could not free enough.
	size := statfsSize(t, mnt)
	fill(t, filepath.Join(mnt, "fill1"), available(t, mnt)-size*20/100)
	d.Signal(syscall.SIGHUP)
	d.Eventually(60*time.Second, "lru1 and lru2 collected", func() error {
		for _, ref := range []string{"example.com/lru1:v1", "example.com/lru2:v1"} {
			if hasImage(d, ref) {
				return fmt.Errorf("%s still there", ref)
			}
		}
		return nil
	})
	for _, ref := range []string{"docker.io/library/busybox:latest", "example.com/down:v1", "example.com/pinned:v1", "example.com/folder:v1"} {
		if !hasImage(d, ref) {
			t.Errorf("%s was collected:\n%s", ref, d.CLI("images", "ls"))
		}
	}
	d.Eventually(30*time.Second, "FreeDiskSpaceFailed", func() error {
		if !strings.Contains(d.CLI("events"), "FreeDiskSpaceFailed") {
			return errors.New("no event yet")
		}
		return nil
	})

	// Unpinned, with the disk still over the high threshold: it goes.
	d.CLI("images", "unpin", "example.com/pinned:v1")
	d.Signal(syscall.SIGHUP)
	d.Eventually(60*time.Second, "pinned collected once unpinned", func() error {
		if hasImage(d, "example.com/pinned:v1") {
			return errStill
		}
		return nil
	})
	for _, ref := range []string{"docker.io/library/busybox:latest", "example.com/down:v1", "example.com/folder:v1"} {
		if !hasImage(d, ref) {
			t.Errorf("%s was collected:\n%s", ref, d.CLI("images", "ls"))
		}
	}
	if p := d.Pod("run"); p == nil || p.Status.ContainerStatuses[0].RestartCount != 0 || p.Status.ContainerStatuses[0].ContainerID != run.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("the running pod was restarted: %+v", p)
	}
}

// Least recently used first: of two unused images, the one whose pod
// stopped earlier goes when freeing one image's worth is enough.
func TestImageGCLeastRecentlyUsedFirst(t *testing.T) {
	t.Parallel()
	mnt := filepath.Join(t.TempDir(), "disk")
	testroot.LoopFS(t, mnt, 256<<20)
	d := newDaemon(t)
	d.RootDir = filepath.Join(mnt, "root")
	b, _ := os.ReadFile(d.Config)
	os.WriteFile(d.Config, append(b, []byte(`imageGCHighThresholdPercent: 60
imageGCLowThresholdPercent: 55
imageMinimumGCAge: 1s
`)...), 0o644)
	d.CLI("images", "import", testdaemon.Image)
	// Imported in the opposite order of use, so import time cannot decide.
	for _, name := range []string{"second", "first"} {
		p := filepath.Join(d.Dir, name+".tar")
		buildImage(t, p, "-ref", "example.com/"+name+":v1", "-pad", strconv.Itoa(24<<20))
		d.CLI("images", "import", p)
	}
	imported := time.Now()
	d.Start()
	for _, name := range []string{"first", "second"} {
		d.WriteManifest(name+".yaml", usingPod(name, "example.com/"+name+":v1"))
		d.WaitRunning(name, 60*time.Second)
		d.RemoveManifest(name + ".yaml")
		d.Eventually(30*time.Second, name+" gone", func() error {
			if d.Pod(name) != nil {
				return errStill
			}
			return nil
		})
	}
	// Every image past imageMinimumGCAge (1s, from its import), or the
	// collector skips it as too young: a removed manifest's pod goes at
	// once, so the pods can come and go within that second.
	time.Sleep(time.Until(imported.Add(1100 * time.Millisecond)))
	// 60% used: down to 55% wants 5% (12.8MiB), under one image's 24MiB.
	size := statfsSize(t, mnt)
	fill(t, filepath.Join(mnt, "fill"), available(t, mnt)-size*40/100)
	d.Signal(syscall.SIGHUP)
	d.Eventually(60*time.Second, "first collected", func() error {
		if hasImage(d, "example.com/first:v1") {
			return errStill
		}
		return nil
	})
	if !hasImage(d, "example.com/second:v1") {
		t.Errorf("the more recently used image was collected too:\n%s", d.CLI("images", "ls"))
	}
}

// importStdin runs `staticpodd images import -` with in on stdin.
func importStdin(d *daemon, in []byte) (string, error) {
	cmd := exec.Command(testdaemon.Bin, "images", "import", "-", "--root-dir", d.RootDir, "--run-dir", d.RunDir)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// An image exported from one store and imported from stdin into another
// runs there; a stream that is cut short or garbage is refused with the
// store unchanged; an export onto a symlink is refused, its target left
// alone.
func TestImagesExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	a := newDaemon(t)
	src := filepath.Join(a.Dir, "rt.tar")
	buildImage(t, src, "-ref", "example.com/rt:v1")
	a.CLI("images", "import", src)
	out := filepath.Join(a.Dir, "export.tar")
	a.CLI("images", "export", "example.com/rt:v1", "-o", out)
	archive, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}

	// Onto a symlink: refused, and what it points at is untouched.
	victim := filepath.Join(a.Dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	link := filepath.Join(a.Dir, "link.tar")
	os.Symlink(victim, link)
	if msg, err := a.CLIErr("images", "export", "example.com/rt:v1", "-o", link); err == nil || !strings.Contains(msg, "refused") {
		t.Errorf("export onto a symlink: %v %s, want refused", err, msg)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}

	b := newDaemon(t)
	before := b.CLI("images", "ls")
	for name, in := range map[string][]byte{"truncated": archive[:len(archive)/2], "garbage": bytes.Repeat([]byte("garbage!"), 4096), "empty": nil} {
		msg, err := importStdin(b, in)
		if err == nil || !strings.Contains(msg, "import from stream") {
			t.Errorf("%s stream: %v %s, want an error naming the stream", name, err, msg)
		}
		if after := b.CLI("images", "ls"); after != before {
			t.Errorf("%s stream changed the store:\n%s", name, after)
		}
	}
	if msg, err := importStdin(b, archive); err != nil || !strings.Contains(msg, "example.com/rt:v1") {
		t.Fatalf("import -: %v %s", err, msg)
	}
	b.Start()
	b.WriteManifest("rt.yaml", strings.Replace(sleeper("rt", ""), "image: busybox", "image: example.com/rt:v1", 1))
	b.WaitRunning("rt", 60*time.Second)
	if got, err := b.CLIErr("exec", "rt", "--", "cat", "/etc/passwd"); err != nil || !strings.Contains(got, "root") {
		t.Errorf("exec in the imported image: %v %s", err, got)
	}
}
