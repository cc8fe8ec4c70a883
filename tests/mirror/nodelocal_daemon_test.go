//go:build controlplane

package mirror

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/mirror"
)

// canary is the value of the Secret the pod uses, which must never reach
// the API server.
const canary = "canary-3f9c1e7a5b"

// nodeLocalManifest is a pod that uses ConfigMaps and Secrets of its
// manifest in every way a pod can, and those objects.
const nodeLocalManifest = `apiVersion: v1
kind: Pod
metadata: {name: objects, namespace: default}
spec:
  terminationGracePeriodSeconds: 3
  imagePullSecrets: [{name: regcred}]
  volumes:
  - {name: config, configMap: {name: app-config}}
  - {name: tls, secret: {secretName: serving}}
  - name: bundle
    projected:
      sources:
      - configMap: {name: app-config}
      - secret: {name: serving}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  containers:
  - name: main
    image: busybox
    env:
    - {name: LEVEL, valueFrom: {configMapKeyRef: {name: app-config, key: level}}}
    - {name: TOKEN, valueFrom: {secretKeyRef: {name: serving, key: token}}}
    envFrom:
    - {configMapRef: {name: app-config}, prefix: CM_}
    - secretRef: {name: serving}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
    - {name: tls, mountPath: /tls}
    - {name: bundle, mountPath: /bundle}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: default}
data: {level: debug}
---
apiVersion: v1
kind: Secret
metadata: {name: serving, namespace: default}
stringData: {token: ` + canary + `}
---
apiVersion: v1
kind: Secret
metadata: {name: regcred, namespace: default}
type: kubernetes.io/dockerconfigjson
stringData: {.dockerconfigjson: '{"auths":{}}'}
`

// staticpodd runs a static pod that uses the ConfigMaps and Secrets of its
// manifest in every way, and the real kube-apiserver, to which it speaks
// with the node's credentials (Node authorizer, NodeRestriction, the
// ServiceAccount plugin), takes its mirror pod and keeps it: one create, no
// delete, through a restart of the daemon; no value of the Secret is on the
// API server, in a pod or an event.
func TestMirrorPodOfStaticPodWithNodeLocalObjects(t *testing.T) {
	f := newFixture(t)
	f.d.WriteManifest("objects.yaml", nodeLocalManifest)
	f.d.Start()
	mp := f.waitMirror("objects", 60*time.Second, "the mirror pod running", running)
	want := `volume config: configMap app-config
volume tls: secret serving
volume bundle: projected configMap app-config, secret serving, downwardAPI
env main LEVEL: configMap app-config key level
env main TOKEN: secret serving key token
envFrom main: configMap app-config prefix CM_
envFrom main: secret serving
imagePullSecrets: secret regcred`
	if got := mp.Annotations[mirror.AnnotationNodeLocalObjects]; got != want {
		t.Errorf("annotation %s:\n%s\nwant:\n%s", mirror.AnnotationNodeLocalObjects, got, want)
	}
	// The pod runs with its objects, not without them.
	if out := f.d.CLI("exec", "objects", "--", "sh", "-c", `echo "$LEVEL $CM_level"; cat /bundle/level; echo; ls /tls`); out != "debug debug\ndebug\ntoken\n" {
		t.Errorf("the container sees %q, want its ConfigMap's level thrice and its Secret's key", out)
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
		mp = p
		return running(p)
	})
	audit := f.c.Audit("default", "objects-"+f.d.Name)
	if creates, deletes := writes(audit); creates != 1 || deletes != 0 {
		t.Errorf("%d creates and %d deletes of the mirror pod, want 1 and 0; audit:\n%s", creates, deletes, audit)
	}
	t.Logf("audit of the mirror pod:\n%s", audit)

	js, err := json.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	onServer, err := f.c.Kubectl("get", "pods,events", "--all-namespaces", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), canary) || strings.Contains(onServer, canary) {
		t.Errorf("the Secret's value is on the API server:\n%s", js)
	}
}
