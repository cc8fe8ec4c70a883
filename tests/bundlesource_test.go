package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/oci/bundle"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// bundlePod is a pod named name that runs until stopped; its readiness
// probe runs ready (a shell command).
func bundlePod(name, ready string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      exec: {command: ["sh", "-c", %q]}
      periodSeconds: 1
`, name, ready)
}

// putBundle records a bundle of files under the daemon's root dir and
// makes it Current, on trial, as `staticpodd bundle apply` does (the
// on-disk contract of oci/bundle): the bundle before it Previous, its
// images pinned. It returns the bundle's digest.
func putBundle(t *testing.T, d *daemon, name string, files map[string]string, rollbackAfter time.Duration, images ...bundle.Image) string {
	t.Helper()
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%s\x00", n, files[n])
	}
	fmt.Fprint(h, name, rollbackAfter)
	hx := hex.EncodeToString(h.Sum(nil))
	rec := bundle.Record{Name: name, Digest: "sha256:" + hx, Applied: time.Now().UTC(), Signer: "accepted",
		Images: images, RollbackAfter: rollbackAfter}
	unlock, err := bundle.LockState(d.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	dir := bundle.ManifestsDir(d.RootDir, hx)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for n, data := range files {
		rec.Manifests = append(rec.Manifests, n)
		if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(bundle.RecordDir(d.RootDir, hx), "bundle.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		d.CLI("images", "pin", img.ID)
	}
	st, err := bundle.ReadState(d.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteState(d.RootDir, bundle.State{Current: hx, Previous: st.Current, Trial: rec.Applied}); err != nil {
		t.Fatal(err)
	}
	return hx
}

func bundleState(t *testing.T, d *daemon) bundle.State {
	t.Helper()
	st, err := bundle.ReadState(d.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// busyboxImage is the daemon's one image, as a bundle records it.
func busyboxImage(t *testing.T, d *daemon) (bundle.Image, func() bool) {
	t.Helper()
	pinned := func() (string, bool) {
		var out struct {
			Images []struct {
				ID     string `json:"id"`
				Pinned bool   `json:"pinned"`
			} `json:"images"`
		}
		if err := json.Unmarshal([]byte(d.CLI("images", "ls", "-o", "json")), &out); err != nil || len(out.Images) != 1 {
			t.Fatalf("images ls: %v %+v", err, out)
		}
		return out.Images[0].ID, out.Images[0].Pinned
	}
	id, _ := pinned()
	return bundle.Image{Ref: "busybox", ID: id}, func() bool { _, p := pinned(); return p }
}

// The bundle source runs the current bundle's pods; a bundle whose pod is
// never Ready is rolled back after its rollback-after (the pods of the one
// before come back, RolledBack recorded, a Warning event, its images not
// in the one before unpinned); one that is Ready is kept and the one before
// released (its record removed, its images unpinned); a daemon restarted
// mid-trial resumes the trial from the state.
func TestBundleSourceTrial(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	img, pinned := busyboxImage(t, d)

	// A: the first bundle, kept once Ready.
	a := putBundle(t, d, "appliance", map[string]string{"web.yaml": bundlePod("web", "true")}, 10*time.Second, img)
	web := d.WaitRunning("web", 30*time.Second)
	if web.Annotations["kubernetes.io/config.source"] != "bundle" {
		t.Errorf("web's config.source %q, want bundle", web.Annotations["kubernetes.io/config.source"])
	}
	d.Eventually(30*time.Second, "bundle A kept", func() error {
		if st := bundleState(t, d); st.Current != a || !st.Trial.IsZero() {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})

	// B: web edited and a pod never Ready; rolled back to A after 10s.
	b := putBundle(t, d, "appliance", map[string]string{
		"web.yaml":   bundlePod("web", "true") + "    env: [{name: V, value: b}]\n",
		"stuck.yaml": bundlePod("stuck", "false"),
	}, 10*time.Second, img)
	d.WaitRunning("stuck", 30*time.Second)
	d.Eventually(40*time.Second, "bundle B rolled back", func() error {
		st := bundleState(t, d)
		if st.Current != a || st.RolledBack == nil || st.RolledBack.Digest != "sha256:"+b {
			return fmt.Errorf("state %+v", st)
		}
		if !strings.Contains(st.RolledBack.Reason, "stuck-"+d.Name) || strings.Contains(st.RolledBack.Reason, "/web-") {
			t.Errorf("rolled back for %q, want the pod stuck named, not web", st.RolledBack.Reason)
		}
		return nil
	})
	d.Eventually(30*time.Second, "A's pods back", func() error {
		if p := d.Pod("stuck"); p != nil {
			return fmt.Errorf("stuck still there")
		}
		if live := livePods(d, "web"); len(live) != 1 || live[0].UID != web.UID {
			return fmt.Errorf("web not back as A's %s", web.UID)
		}
		return nil
	})
	if !pinned() {
		t.Errorf("busybox unpinned by B's rollback; A still has it")
	}
	if _, err := os.Stat(bundle.RecordDir(d.RootDir, b)); !os.IsNotExist(err) {
		t.Errorf("B's record after its rollback: %v, want it removed", err)
	}
	var rolled bool
	for _, ev := range events(d) {
		if ev.Reason == "RolledBack" && ev.Type == "Warning" && strings.Contains(ev.Message, "sha256:"+b) && strings.Contains(ev.Message, "stuck-"+d.Name) {
			rolled = true
		}
	}
	if !rolled {
		t.Errorf("no Warning RolledBack event naming bundle B and pod stuck:\n%s", d.CLI("events"))
	}

	// C: Ready, but the daemon is restarted mid-trial; it is kept, and A
	// released: its record removed, busybox (in A, not in C) unpinned. Its
	// pod ok is Ready only with the value of the ConfigMap written beside
	// it, as in a directory.
	d.Stop()
	ok := strings.Replace(bundlePod("ok", `test "$V" = from-the-bundle`), "    readinessProbe:",
		"    env: [{name: V, valueFrom: {configMapKeyRef: {name: conf, key: v}}}]\n    readinessProbe:", 1) +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  v: from-the-bundle\n"
	c := putBundle(t, d, "appliance", map[string]string{
		"web.yaml": bundlePod("web", "true"),
		"ok.yaml":  ok,
	}, 20*time.Second)
	d.Start()
	d.WaitRunning("ok", 30*time.Second)
	d.Eventually(30*time.Second, "bundle C kept", func() error {
		if st := bundleState(t, d); st.Current != c || !st.Trial.IsZero() || st.Previous != "" {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	if live := livePods(d, "web"); len(live) != 1 || live[0].UID != web.UID {
		t.Errorf("web restarted by bundle C, which does not change it")
	}
	d.Eventually(10*time.Second, "A released", func() error {
		if _, err := os.Stat(bundle.RecordDir(d.RootDir, a)); !os.IsNotExist(err) {
			return fmt.Errorf("A's record: %v", err)
		}
		if pinned() {
			return fmt.Errorf("busybox still pinned")
		}
		return nil
	})
	var kept bool
	for _, ev := range events(d) {
		kept = kept || ev.Reason == "BundleReady" && strings.Contains(ev.Message, "sha256:"+c)
	}
	if !kept {
		t.Errorf("no BundleReady event for C:\n%s", d.CLI("events"))
	}
}

// A manifest URL that serves a bundle (made by bundle create) has it
// applied through bundle apply's verification and import: its pods run
// from the bundle source, its images are the bundle's, the URL's own set
// is empty, and it is applied once however often it is polled.
func TestBundleFromManifestURL(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := t.TempDir()
	const ref = "example.com/bundle/busybox:1"
	archive := filepath.Join(dir, "busybox-oci.tar")
	buildImage(t, archive, "-format", "oci", "-ref", ref)
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o700); err != nil {
		t.Fatal(err)
	}
	web := strings.Replace(bundlePod("web", "true"), "image: busybox", "image: "+ref, 1)
	if err := os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(web), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "web-bundle.tar")
	key, _, _ := writeKey(t, dir, "bundle")
	d.CLI("bundle", "create", "--name", "web", "--key", key, "-o", out, "--image", archive, manifests)
	body, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	srv := testdaemon.NewManifestServer(t, string(body))
	useURL(t, d, srv.URL())
	d.Start()

	pod := d.WaitRunning("web", 60*time.Second)
	if src := pod.Annotations["kubernetes.io/config.source"]; src != "bundle" {
		t.Errorf("web's config.source %q, want bundle", src)
	}
	st := bundleState(t, d)
	rec, err := bundle.ReadRecord(d.RootDir, st.Current)
	if err != nil || rec.Name != "web" || len(rec.Images) != 1 || rec.RollbackAfter <= 0 {
		t.Fatalf("record of the bundle applied: %+v, %v", rec, err)
	}
	if id := pod.Status.ContainerStatuses[0].ImageID; !strings.Contains(id, rec.Images[0].Digest) && !strings.Contains(id, strings.TrimPrefix(rec.Images[0].ID, "sha256:")) {
		t.Errorf("web runs image %s, not the bundle's %+v", id, rec.Images[0])
	}
	d.Eventually(40*time.Second, "the bundle kept once Ready", func() error {
		if st := bundleState(t, d); !st.Trial.IsZero() {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	served := srv.Served()
	d.Eventually(10*time.Second, "three more polls", func() error {
		if srv.Served() < served+3 {
			return errStill
		}
		return nil
	})
	applied := d.WaitOutput(10*time.Second, "the bundle applied", func(out string) bool {
		return strings.Contains(out, "bundle from the manifest URL applied")
	})
	if n := strings.Count(applied, "bundle from the manifest URL applied"); n != 1 {
		t.Errorf("the bundle was applied %d times, want once", n)
	}
	if status := d.CLI("bundle", "status"); !strings.Contains(status, rec.Digest) {
		t.Errorf("bundle status does not name %s:\n%s", rec.Digest, status)
	}
}
