package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// Pulls from Docker's registry over plain HTTP on 127.0.0.1 with no
// hosts.toml at all, as containerd does for a registry on the loopback:
// the pod's pull and `images pull` both.
func TestPullDistributionRegistryPlainHTTPLoopback(t *testing.T) {
	t.Parallel()
	bin := registryBin(t)
	d := newDaemon(t)
	r := startDistRegistryWith(t, bin, false)

	base, err := tarball.ImageFromPath(testdaemon.Image, nil)
	if err != nil {
		t.Fatal(err)
	}
	image := func(version string) v1.Image {
		img, err := mutate.AppendLayers(base, fileLayer(t, map[string][]byte{"version": []byte(version)}))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	r.push(image("plain-v1"), "busybox:1")
	r.push(image("plain-v2"), "busybox:2")

	// An empty registry config dir: no hosts.toml, no _default.
	empty := filepath.Join(d.Dir, "certs.d")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--registry-config-dir", empty)
	readyDir := filepath.Join(d.Dir, "ready")
	if err := os.MkdirAll(readyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Start()

	// `images pull` shares the puller: the same with no hosts.toml.
	ref2 := r.addr + "/busybox:2"
	cmd := exec.Command(testdaemon.Bin, "images", "pull", ref2,
		"--root-dir", d.RootDir, "--run-dir", d.RunDir, "--registry-config-dir", empty)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pulled ") || !strings.Contains(string(out), ref2) {
		t.Errorf("images pull %s: %v\n%s", ref2, err, out)
	}
	if n := r.requests(`busybox/manifests/2`); n == 0 {
		t.Errorf("images pull did not ask the registry for %s", ref2)
	}

	blobs := r.requests(`busybox/blobs/[^ ]+`)
	ref := r.addr + "/busybox:1"
	d.WriteManifest("plain.yaml", readyPod("plain", ref, readyDir))
	d.Eventually(60*time.Second, "the pod runs the image pulled over plain HTTP", func() error {
		b, err := os.ReadFile(filepath.Join(readyDir, "plain"))
		if err != nil {
			return fmt.Errorf("%v; pod %+v", err, statusOf(d.Pod("plain")).State)
		}
		if string(b) != "plain-v1" {
			return fmt.Errorf("it runs %q", b)
		}
		return nil
	})
	// The container wrote its file before the worker published the start:
	// the status follows.
	d.Eventually(30*time.Second, "the status says the pulled image runs", func() error {
		if cs := statusOf(d.Pod("plain")); cs.State.Running == nil || cs.Image != ref {
			return fmt.Errorf("status image %s, state %+v; want %s running", cs.Image, cs.State, ref)
		}
		return nil
	})
	// The config and the version layer came from the registry, over HTTP.
	if n := r.requests(`busybox/blobs/[^ ]+`) - blobs; n != 2 {
		t.Errorf("%d blob GETs, want 2: the config and the version layer", n)
	}

	if t.Failed() {
		t.Logf("registry's log:\n%s", r.Stderr())
	}
	d.RemoveManifest("plain.yaml")
	d.Eventually(30*time.Second, "the pod is gone", func() error {
		if n := len(d.Pods()); n != 0 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	d.AssertNoLeaks()
}
