package tests

import (
	"bytes"
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
// dir or from a URL, or from the Secret's stringData in a file of the
// manifest dir.
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
	t.Run("credential", func(t *testing.T) { secretCanary(t, credential, false) })
	// The URL's last good body is kept under the root dir, as served: with
	// the credential's name, never its value.
	t.Run("credential from a URL", func(t *testing.T) { secretCanary(t, credential, true) })
	t.Run("stringData", func(t *testing.T) {
		secretCanary(t, func(d *daemon, canary string) string {
			return `apiVersion: v1
kind: Secret
metadata: {name: web}
stringData: {token: ` + canary + `}
`
		}, false)
	})
}

// secretCanary runs the pod of TestSecretCanary with the Secret setup makes,
// both in files of the manifest dir, or served by a URL as a List.
func secretCanary(t *testing.T, setup func(d *daemon, canary string) (secretYAML string), viaURL bool) {
	t.Parallel()
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
	source := d.Manifests
	if viaURL {
		srv.Set("apiVersion: v1\nkind: List\nitems:\n" + listItem(secret) + listItem(pod))
		t.Cleanup(func() { srv.Set(emptyList) })
		useURL(t, d, srv.URL())
		source = srv.URL()
	}
	d.Args = append(d.Args, "--verbose") // what it logs at debug level too
	d.Start()
	if !viaURL {
		d.WriteManifest("secret.yaml", secret)
		d.WriteManifest("web.yaml", pod)
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

// filesHoldingOnDisk lists the regular files under dir that contain s. The
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
		if err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
