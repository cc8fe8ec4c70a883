package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A downwardAPI volume holds the pod's fields in the kubelet's layout, read
// only, owned by fsGroup; a manifest with its own uid whose labels change
// keeps its container running and the volume follows, atomically.
func TestDownwardAPIVolume(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	manifest := func(tier string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: info
  uid: downward-1
  labels: {app: web, tier: %s}
  annotations: {note: "say \"hi\""}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 2000}
  volumes:
  - name: podinfo
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: annotations, fieldRef: {fieldPath: metadata.annotations}}
      - {path: tier, fieldRef: {fieldPath: "metadata.labels['tier']"}}
      - {path: meta/name, fieldRef: {fieldPath: metadata.name}}
      - {path: meta/namespace, fieldRef: {fieldPath: metadata.namespace}}
      - {path: meta/uid, fieldRef: {fieldPath: metadata.uid}, mode: 0400}
      - {path: mem, resourceFieldRef: {containerName: main, resource: limits.memory, divisor: 1Mi}}
  containers:
  - name: main
    image: busybox
    resources: {limits: {memory: 64Mi}}
    volumeMounts: [{name: podinfo, mountPath: /etc/podinfo}]
    command: ["sh", "-c", %q]
`, tier, `cd /etc/podinfo
for f in labels annotations tier meta/name meta/namespace meta/uid mem; do echo "$f=$(cat $f | tr '\n' ';')"; done
echo link=$(readlink labels) data=$(readlink ..data | cut -c1-4)
echo uidmode=$(stat -L -c '%a %g' meta/uid)
if touch /etc/podinfo/x 2>/dev/null; then echo writable=yes; else echo writable=no; fi
echo ready
until grep -q 'tier="back"' labels; do sleep 0.1; done
echo updated tier=$(cat tier) labels=$(cat labels | tr '\n' ';')
sleep 3600`)
	}
	d.WriteManifest("info.yaml", manifest("front"))
	pod := d.WaitRunning("info", 30*time.Second)
	started := pod.Status.ContainerStatuses[0].ContainerID
	var logs string
	d.Eventually(30*time.Second, "the container's report", func() error {
		logs = d.CLI("logs", "info")
		if !strings.Contains(logs, "ready\n") {
			return fmt.Errorf("log so far %q", logs)
		}
		return nil
	})
	for _, want := range []string{
		`labels=app="web";tier="front"`,
		"tier=front",
		"meta/name=info-" + d.Name,
		"meta/namespace=default",
		"meta/uid=downward-1",
		"mem=64",
		"link=..data/labels data=..20",
		"uidmode=440 2000", // 0400 with fsGroup's read added
		"writable=no",
	} {
		if !strings.Contains(logs, want+"\n") {
			t.Errorf("log %q lacks %q", logs, want)
		}
	}
	// Every annotation, the kubelet's own config.* ones included.
	for _, want := range []string{`note="say \"hi\""`, `kubernetes.io/config.source="file"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log %q lacks %q", logs, want)
		}
	}

	d.WriteManifest("info.yaml", manifest("back"))
	d.Eventually(30*time.Second, "the volume follows the new labels", func() error {
		logs = d.CLI("logs", "info")
		if !strings.Contains(logs, `updated tier=back labels=app="web";tier="back"`) {
			return fmt.Errorf("log so far %q", logs)
		}
		return nil
	})
	if p := d.Pod("info"); p == nil || p.Status.ContainerStatuses[0].ContainerID != started || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the container was restarted for a label change: %+v", p.Status.ContainerStatuses)
	}
	d.RemoveManifest("info.yaml")
	d.Eventually(30*time.Second, "pod gone", func() error {
		if len(d.Pods()) > 0 {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}
