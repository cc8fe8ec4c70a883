package tests

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// TestSecretCanary: a Secret whose value is a random canary, used by a pod
// as env (secretKeyRef, and envFrom) and as a secret volume. The container
// sees the value; no output of the daemon or the command line shows it, and
// no file under the root dir, the run dir or the log dir holds it. The
// secret volume's own tmpfs, which is memory, is where the value is meant to
// be: it is not searched (nor is any other mount under those dirs). The
// manifest dir, where a user wrote a Secret's stringData, is not searched
// either.
//
// The value comes from a credential of the daemon's (systemd's
// $CREDENTIALS_DIRECTORY, which the test makes), in a file of the manifest
// dir or from a URL, or from the Secret's stringData: in a file of the
// manifest dir of its own, in the pod's file, or in a URL's List. The copies
// of the pod's file and of the URL's body kept under the root dir, for a
// restart with the manifest unusable, leave out a Secret with values: such a
// restart adopts the pod as it runs, even one whose restart-on-change names
// the Secret.
func TestSecretCanary(t *testing.T) {
	credential := func(d *daemon, canary string) string {
		creds := filepath.Join(d.Dir, "credentials")
		if err := os.MkdirAll(creds, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(creds, "web-token"), []byte(canary), 0o400); err != nil {
			t.Fatal(err)
		}
		d.Env = append(d.Env, "CREDENTIALS_DIRECTORY="+creds)
		return `apiVersion: v1
kind: Secret
metadata:
  name: web
  annotations: {staticpodd.io/credentials: "token=web-token"}
type: Opaque
`
	}
	stringData := func(d *daemon, canary string) string {
		return `apiVersion: v1
kind: Secret
metadata: {name: web}
stringData: {token: ` + canary + `}
`
	}
	t.Run("credential", func(t *testing.T) { secretCanary(t, credential, fileOfItsOwn) })
	// The URL's last good body is kept under the root dir: with the
	// credential's name, never its value.
	t.Run("credential from a URL", func(t *testing.T) { secretCanary(t, credential, fromURL) })
	t.Run("stringData", func(t *testing.T) { secretCanary(t, stringData, fileOfItsOwn) })
	t.Run("stringData in the pod's file", func(t *testing.T) { secretCanary(t, stringData, podFile) })
	t.Run("stringData from a URL", func(t *testing.T) { secretCanary(t, stringData, fromURL) })
	// The pod's restart-on-change names the Secret: its absence from the
	// kept copy is no change of the generation that runs.
	t.Run("stringData in the pod's file with restart-on-change", func(t *testing.T) { secretCanary(t, stringData, podFileRestartOnChange) })
}

// secretPlace is where secretCanary writes the Secret.
type secretPlace int

const (
	fileOfItsOwn secretPlace = iota // a file of the manifest dir beside the pod's
	podFile                         // a document of the pod's file
	fromURL                         // an item of the List a URL serves, with the pod
	// as podFile, the pod's staticpodd.io/restart-on-change naming the Secret
	podFileRestartOnChange
)

// secretCanary runs the pod of TestSecretCanary with the Secret setup makes,
// placed as where says.
func secretCanary(t *testing.T, setup func(d *daemon, canary string) (secretYAML string), where secretPlace) {
	t.Parallel()
	viaURL := where == fromURL
	const emptyList = "apiVersion: v1\nkind: List\nitems: []\n"
	var srv *manifestServer
	if viaURL {
		// Before the daemon: it serves the empty list for the daemon's
		// cleanup, which waits for every pod to go.
		srv = newManifestServer(t, emptyList)
	}
	d := newDaemon(t)
	canary := "canary-" + testdaemon.RandHex(16)
	secret := setup(d, canary)
	pod := sleeper("web", `    env:
    - name: TOKEN
      valueFrom: {secretKeyRef: {name: web, key: token}}
    envFrom:
    - {prefix: FROM_, secretRef: {name: web}}
    volumeMounts:
    - {name: secret, mountPath: /secret}
  volumes:
  - name: secret
    secret: {secretName: web}
`)
	if where == podFileRestartOnChange {
		annotated := strings.Replace(pod, "  name: web\n", "  name: web\n  annotations: {staticpodd.io/restart-on-change: secret/web}\n", 1)
		if annotated == pod {
			t.Fatalf("no metadata to annotate in:\n%s", pod)
		}
		pod = annotated
	}
	source := d.Manifests
	if viaURL {
		srv.Set("apiVersion: v1\nkind: List\nitems:\n" + listItem(secret) + listItem(pod))
		t.Cleanup(func() { srv.Set(emptyList) })
		useURL(t, d, srv.URL())
		source = srv.URL()
	}
	d.Args = append(d.Args, "--verbose") // what it logs at debug level too
	d.Start()
	switch where {
	case fileOfItsOwn:
		d.WriteManifest("secret.yaml", secret)
		d.WriteManifest("web.yaml", pod)
	case podFile, podFileRestartOnChange:
		d.WriteManifest("web.yaml", secret+"---\n"+pod)
	}
	d.WaitRunning("web", 30*time.Second)

	// The container sees it, in its env and its volume, and so does exec.
	want := canary + "\n" + canary + "\n" + canary
	if out, errOut, code := execOut(d, "", "web", "--", "sh", "-c", `echo "$TOKEN"; echo "$FROM_token"; cat /secret/token`); out != want || code != 0 {
		t.Fatalf("exec: %q %q %d; want the value from env, envFrom and the volume", out, errOut, code)
	}

	// No output shows it.
	outputs := map[string]string{}
	cli := func(args ...string) {
		outputs[strings.Join(args, " ")] = d.CLI(args...)
	}
	cli("ps")
	cli("ps", "-o", "wide")
	cli("describe", "web")
	cli("events")
	cli("logs", "web")
	cli("config", "--config", d.Config)
	cli("validate", "--hostname-override", d.Name, source)
	for _, path := range []string{"/pods", "/stats/summary", "/metrics"} {
		resp, err := d.Client().Get(d.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
		outputs["GET "+path] = string(b)
	}
	if !strings.Contains(outputs["GET /pods"], "secretKeyRef") {
		t.Errorf("/pods shows no secretKeyRef: not the pod's spec?\n%.2000s", outputs["GET /pods"])
	}
	// A daemon started again reads it all again, adopts the container, and
	// execs in it with the value, which it never had.
	outputs["the daemon's stderr"] = d.Output()
	d.Stop()
	d.Start()
	d.WaitRunning("web", 30*time.Second)
	if out, errOut, code := execOut(d, "", "web", "--", "sh", "-c", `echo "$TOKEN"`); out != canary+"\n" || code != 0 {
		t.Errorf("exec after a restart: %q %q %d; want the value", out, errOut, code)
	}
	outputs["the restarted daemon's stderr"] = d.Output()

	// Started again with the manifest unusable (the pod's file invalid,
	// the server down), the daemon runs the pod from the copy kept under
	// the root dir, which holds no Secret value: the container is adopted
	// as it runs, its environment, which has the value, untouched.
	running := d.Pod("web").Status.ContainerStatuses[0].ContainerID
	d.Stop()
	if viaURL {
		srv.Down()
		t.Cleanup(srv.Up) // for the daemon's cleanup, should the test stop first
	} else {
		d.WriteManifest("web.yaml", "apiVersion: v1\nkind: Pod\n")
	}
	d.Start()
	d.Eventually(30*time.Second, "the pod adopted from its last good copy", func() error {
		p := d.Pod("web")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("pod %v", p)
		}
		if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != running || cs.RestartCount != 0 || cs.State.Running == nil {
			return fmt.Errorf("container %s, %d restarts, running %v; want %s adopted", cs.ContainerID, cs.RestartCount, cs.State.Running != nil, running)
		}
		return nil
	})
	if out, errOut, code := execOut(d, "", "web", "--", "sh", "-c", `echo "$TOKEN"`); out != canary+"\n" || code != 0 {
		t.Errorf("exec after a restart from the last good copy: %q %q %d; want the value", out, errOut, code)
	}
	restored := "manifest unusable at start; running the last good pod kept with its state"
	if viaURL {
		restored = "loaded the last good set of the manifest URL"
	}
	// The daemon restarted with the manifest unusable says so.
	d.WaitLine(10*time.Second, restored)
	outputs["the daemon restarted with the manifest unusable: stderr"] = d.Output()
	if viaURL {
		srv.Up()
	}
	for what, out := range outputs {
		t.Logf("%s: %d bytes", what, len(out))
		if strings.Contains(out, canary) {
			t.Errorf("%s shows the secret's value:\n%.3000s", what, out)
		}
	}

	// No file holds it.
	for _, dir := range []string{d.RootDir, d.RunDir, d.LogsDir} {
		for _, hit := range filesHoldingOnDisk(t, dir, canary) {
			t.Errorf("%s holds the secret's value", hit)
		}
	}
}

// listItem is a YAML document as an item of a List's items.
func listItem(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return "- " + strings.TrimPrefix(strings.Join(lines, "\n"), "  ") + "\n"
}

// encodings are s and the parts of its base64 encoding that are s's alone,
// at each of the three offsets it may start at: a record that keeps bytes
// in JSON (a pod's manifest.json) holds them base64-encoded.
func encodings(s string) [][]byte {
	out := [][]byte{[]byte(s)}
	for pad := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, pad), s...))
		from := 0
		if pad > 0 {
			from = 4 // the first quantum mixes the padding in
		}
		out = append(out, []byte(enc[from:len(enc)-4])) // the last one what follows
	}
	return out
}

// filesHoldingOnDisk lists the regular files under dir that contain s, or
// its base64 encoding. The
// mounts under dir are not entered: the secret volume's tmpfs (memory, where
// the value belongs), a pod's /dev/shm, its namespaces, its rootfs overlay;
// each one skipped is logged.
func filesHoldingOnDisk(t *testing.T, dir, s string) []string {
	t.Helper()
	dev := func(p string) (uint64, bool) {
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		return st.Dev, err == nil
	}
	root, ok := dev(dir)
	if !ok {
		return nil
	}
	var hits []string
	forms := encodings(s)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile
		}
		if at, ok := dev(p); !ok || at != root {
			if e.IsDir() {
				t.Logf("not searched, another file system: %s", p)
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, enc := range forms {
			if bytes.Contains(b, enc) {
				hits = append(hits, p)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
