//go:build controlplane

package mirror

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/mirror"
)

// nodeLocalManifest uses ConfigMaps and Secrets of the node in every way a
// pod can; optional ones, so that it runs without them.
const nodeLocalManifest = `apiVersion: v1
kind: Pod
metadata: {name: objects, namespace: default}
spec:
  terminationGracePeriodSeconds: 3
  imagePullSecrets: [{name: regcred}]
  volumes:
  - {name: config, configMap: {name: app-config, optional: true}}
  - {name: tls, secret: {secretName: serving, optional: true}}
  - name: bundle
    projected:
      sources:
      - configMap: {name: app-config, optional: true}
      - secret: {name: serving, optional: true}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  containers:
  - name: main
    image: busybox
    env:
    - {name: LEVEL, valueFrom: {configMapKeyRef: {name: app-config, key: level, optional: true}}}
    - {name: TOKEN, valueFrom: {secretKeyRef: {name: serving, key: token, optional: true}}}
    envFrom:
    - {configMapRef: {name: app-config, optional: true}, prefix: CM_}
    - secretRef: {name: serving, optional: true}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
    - {name: tls, mountPath: /tls}
    - {name: bundle, mountPath: /bundle}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`

// staticpodd runs a static pod that uses the node's ConfigMaps and Secrets
// in every way, and the real kube-apiserver, to which it speaks with the
// node's credentials (Node authorizer, NodeRestriction, the ServiceAccount
// plugin), takes its mirror pod and keeps it: one create, no delete,
// through a restart of the daemon.
func TestMirrorPodOfStaticPodWithNodeLocalObjects(t *testing.T) {
	f := newFixture(t)
	f.d.WriteManifest("objects.yaml", nodeLocalManifest)
	f.d.Start()
	mp := f.waitMirror("objects", 60*time.Second, "the mirror pod running", running)
	want := `volume config: configMap app-config (optional)
volume tls: secret serving (optional)
volume bundle: projected configMap app-config (optional), secret serving (optional), downwardAPI
env main LEVEL: configMap app-config key level (optional)
env main TOKEN: secret serving key token (optional)
envFrom main: configMap app-config (optional) prefix CM_
envFrom main: secret serving (optional)
imagePullSecrets: secret regcred`
	if got := mp.Annotations[mirror.AnnotationNodeLocalObjects]; got != want {
		t.Errorf("annotation %s:\n%s\nwant:\n%s", mirror.AnnotationNodeLocalObjects, got, want)
	}
	uid := mp.UID

	f.d.Stop()
	f.d.Start()
	f.waitMirror("objects", 60*time.Second, "the mirror pod running after the restart", func(p *v1.Pod) error {
		if p.UID != uid {
			return fmt.Errorf("mirror pod uid %s, was %s", p.UID, uid)
		}
		if local := f.d.Pod("objects"); local == nil || containerID(local) == "" || containerID(p) != containerID(local) {
			return fmt.Errorf("mirror container %q, local pod %v", containerID(p), local)
		}
		return running(p)
	})
	audit := f.c.Audit("default", "objects-"+f.d.Name)
	if creates, deletes := writes(audit); creates != 1 || deletes != 0 {
		t.Errorf("%d creates and %d deletes of the mirror pod, want 1 and 0; audit:\n%s", creates, deletes, audit)
	}
	t.Logf("audit of the mirror pod:\n%s", audit)
}
