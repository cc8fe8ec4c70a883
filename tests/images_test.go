package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A pod whose image is not in the store (and that may not pull it) waits with
// ErrImageNeverPull and starts
// once the image arrives in the import folder, even when the tarball is copied
// in slowly, as scp would. The periodic sync is an hour away: only the
// import's own wake-up can start the pod.
func TestImageArrivesThroughImportFolder(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	tar := filepath.Join(d.Dir, "later.tar")
	buildImage(t, tar, "-ref", "example.com/later:v1")
	cfg, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("syncFrequency: 5s"), []byte("syncFrequency: 1h"), 1)
	if err := os.WriteFile(d.Config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	d.Start()
	d.WriteManifest("later.yaml", `apiVersion: v1
kind: Pod
metadata: {name: later}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: example.com/later:v1
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	d.Eventually(15*time.Second, "ErrImageNeverPull", func() error {
		p := d.Pod("later")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("no status yet")
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != "ErrImageNeverPull" {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})

	data, err := os.ReadFile(tar)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(d.RootDir, "images", "import", "later.tar")
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // a slow copy: longer than the import folder's quiet time
	if _, err := f.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d.WaitRunning("later", 30*time.Second)
	if out := d.CLI("images", "ls"); !strings.Contains(out, "example.com/later:v1") {
		t.Errorf("images ls does not show the imported image:\n%s", out)
	}
}
