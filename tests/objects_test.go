package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Secret written beside a pod takes a key's value from a credential of
// the daemon's unit ($CREDENTIALS_DIRECTORY, as systemd sets it): while the
// credential is missing, ps says which file, Secret, key and credential;
// once it is there the problem goes. A broken object is a problem of its
// file naming the field. No Secret's value is shown anywhere.
func TestObjectsBesidePods(t *testing.T) {
	t.Parallel()
	const canary = "canary-5b0d7e21"
	d := newDaemon(t)
	creds := t.TempDir()
	d.Env = append(d.Env, "CREDENTIALS_DIRECTORY="+creds)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", "")+`---
apiVersion: v1
kind: Secret
metadata:
  name: keys
  annotations: {staticpodd.io/credentials: "tls.key=apiserver.key"}
stringData: {plain: `+canary+`}
`)
	d.WriteManifest("bad.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: bad}\nstringData: {a/b: "+canary+"}\n")
	d.WaitRunning("web", 30*time.Second)
	for _, want := range []string{
		`Secret default/keys: key "tls.key": credential "apiserver.key": ` + filepath.Join(creds, "apiserver.key") + ": no such file or directory",
		`bad.yaml: stringData[a/b]: Invalid value: "a/b"`,
	} {
		d.Eventually(15*time.Second, "the problem in ps -o wide", func() error {
			if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, want) {
				return fmt.Errorf("ps -o wide lacks %q:\n%s", want, out)
			}
			return nil
		})
	}
	if err := os.WriteFile(filepath.Join(creds, "apiserver.key"), []byte(canary), 0o400); err != nil {
		t.Fatal(err)
	}
	d.Eventually(15*time.Second, "the credential's problem gone", func() error {
		if out := d.CLI("ps", "-o", "wide"); strings.Contains(out, "apiserver.key") {
			return fmt.Errorf("ps -o wide:\n%s", out)
		}
		return nil
	})
	for what, out := range map[string]string{
		"ps -o wide": d.CLI("ps", "-o", "wide"), "events": d.CLI("events"), "config": d.CLI("config"), "daemon log": d.Output(),
	} {
		if strings.Contains(out, canary) {
			t.Errorf("%s shows a Secret's value:\n%s", what, out)
		}
	}
}
