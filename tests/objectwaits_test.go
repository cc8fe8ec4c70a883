package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// ps and describe say which ConfigMap or Secret a waiting pod needs: a
// container's env, a volume (once for the pod); once the objects arrive, the
// pods run and nothing is said.
func TestPsSaysWhichObjectAPodWaitsFor(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	pod := func(name, spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: kube-system}\nspec:\n  terminationGracePeriodSeconds: 1\n" + spec
	}
	d.WriteManifest("env.yaml", pod("env", `  containers:
  - name: main
    image: busybox
    command: [sh, -c, "sleep 3600"]
    env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]
`))
	d.WriteManifest("vol.yaml", pod("vol", `  volumes: [{name: certs, secret: {secretName: api-certs}}]
  containers:
  - {name: main, image: busybox, command: [sh, -c, "sleep 3600"], volumeMounts: [{name: certs, mountPath: /certs}]}
`))
	envLine := `kube-system/env-` + d.Name + ` main: secret kube-system/db (CreateContainerConfigError: secret "db" not found)`
	volLine := `kube-system/vol-` + d.Name + ` secret kube-system/api-certs (ContainerCreating: MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found)`
	d.Eventually(30*time.Second, "ps says what the pods wait for", func() error {
		for _, args := range [][]string{{"ps"}, {"ps", "-o", "wide"}} {
			if out := d.CLI(args...); !strings.Contains(out, "Waiting for ConfigMaps and Secrets:\n  "+envLine+"\n  "+volLine+"\n") {
				return fmt.Errorf("%s:\n%s", strings.Join(args, " "), out)
			}
		}
		return nil
	})
	if out := d.CLI("describe", "-n", "kube-system", "vol"); !strings.Contains(out, "Waiting For:\n  secret kube-system/api-certs (ContainerCreating: MountVolume.SetUp") {
		t.Errorf("describe vol:\n%s", out)
	}
	d.WriteManifest("secrets.yaml", `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: kube-system}
stringData: {password: pw}
---
apiVersion: v1
kind: Secret
metadata: {name: api-certs, namespace: kube-system}
stringData: {tls.key: k}
`)
	d.WaitRunning("env", 30*time.Second)
	d.WaitRunning("vol", 30*time.Second)
	if wide := d.CLI("ps", "-o", "wide"); strings.Contains(wide, "Waiting for ConfigMaps and Secrets") {
		t.Errorf("ps -o wide still says the pods wait:\n%s", wide)
	}
	for _, f := range []string{"env.yaml", "vol.yaml", "secrets.yaml"} {
		d.RemoveManifest(f)
	}
	d.Eventually(30*time.Second, "the pods are gone", func() error {
		if n := len(d.Pods()); n != 0 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
}
