package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// configMapDoc is a ConfigMap of the default namespace with data.
func configMapDoc(name string, data map[string]string) string {
	js, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]string{"name": name}, "data": data})
	return string(js) + "\n"
}

// A pod uses its ConfigMap and Secret as a pod of the kubelet's: env from a
// key and envFrom with a prefix, a configMap volume, a secret volume with
// defaultMode 0400 on a tmpfs owned by fsGroup, a projected volume with a
// downwardAPI source, all read-only; an edit of the ConfigMap reaches its
// volume by a swap of ..data while the container runs, not its env nor a
// subPath mount of it.
func TestConfigMapAndSecretInPod(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("cfg.yaml", configMapDoc("web-config", map[string]string{"greeting": "hello", "b.conf": "x=1", "1st": "digit"}))
	d.WriteManifest("secret.yaml", `apiVersion: v1
kind: Secret
metadata: {name: web-secret}
stringData: {password: pa55-word}
`)
	script := strings.Join([]string{
		`echo greeting=$GREETING password=$PASSWORD cfg_greeting=$CFG_greeting $(env | grep ^CFG_1st=)`,
		`echo config=$(cat /config/greeting) bconf=$(cat /etc/b.conf) link=$(readlink /config/greeting)`,
		`echo secret=$(cat /secret/password) mode=$(stat -L -c '%a %g' /secret/password)`,
		`echo all=$(cat /all/cfg/greeting),$(cat /all/sec/pw),$(cat /all/name) pwmode=$(stat -L -c %a /all/sec/pw)`,
		`if touch /config/x 2>/dev/null; then echo writable=yes; else echo writable=no; fi`,
		`echo ready`,
		`until grep -q hello2 /config/greeting; do sleep 0.1; done`,
		`echo updated config=$(cat /config/greeting) bconf=$(cat /etc/b.conf) greeting=$GREETING all=$(cat /all/cfg/greeting)`,
		`sleep 3600`,
	}, "; ")
	d.WriteManifest("web.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 2000}
  volumes:
  - {name: config, configMap: {name: web-config}}
  - {name: secret, secret: {secretName: web-secret, defaultMode: 0400}}
  - name: all
    projected:
      sources:
      - configMap: {name: web-config, items: [{key: greeting, path: cfg/greeting}]}
      - secret: {name: web-secret, items: [{key: password, path: sec/pw, mode: 0440}]}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  containers:
  - name: main
    image: busybox
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: web-config, key: greeting}}}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: web-secret, key: password}}}
    envFrom: [{prefix: CFG_, configMapRef: {name: web-config}}]
    volumeMounts:
    - {name: config, mountPath: /config}
    - {name: config, mountPath: /etc/b.conf, subPath: b.conf}
    - {name: secret, mountPath: /secret}
    - {name: all, mountPath: /all}
    command: [sh, -c, %q]
`, script))
	pod := d.WaitRunning("web", 60*time.Second)
	started := pod.Status.ContainerStatuses[0].ContainerID
	var logs string
	d.Eventually(30*time.Second, "the container's report", func() error {
		if logs = d.CLI("logs", "web"); !strings.Contains(logs, "ready\n") {
			return fmt.Errorf("log so far %q", logs)
		}
		return nil
	})
	for _, want := range []string{
		"greeting=hello password=pa55-word cfg_greeting=hello CFG_1st=digit",
		"config=hello bconf=x=1 link=..data/greeting",
		"secret=pa55-word mode=440 2000", // 0400 with fsGroup's read added
		"all=hello,pa55-word,web-" + d.Name + " pwmode=440",
		"writable=no",
	} {
		if !strings.Contains(logs, want+"\n") {
			t.Errorf("log %q lacks %q", logs, want)
		}
	}

	// Secret-bearing volumes are on a tmpfs each, never on the root dir's disk.
	if got := memoryVolumes(t, d, pod.UID, "kubernetes.io~secret"); !slices.Equal(got, []string{"secret"}) {
		t.Errorf("tmpfs secret volumes %q, want [secret]", got)
	}
	if got := memoryVolumes(t, d, pod.UID, "kubernetes.io~projected"); !slices.Equal(got, []string{"all"}) {
		t.Errorf("tmpfs projected volumes %q, want [all]", got)
	}
	if got := memoryVolumes(t, d, pod.UID, "kubernetes.io~configmap"); len(got) != 0 {
		t.Errorf("tmpfs configMap volumes %q, want none (the kubelet's are on disk)", got)
	}

	d.WriteManifest("cfg.yaml", configMapDoc("web-config", map[string]string{"greeting": "hello2", "b.conf": "x=2", "1st": "digit"}))
	d.Eventually(60*time.Second, "the volume follows the ConfigMap", func() error {
		if logs = d.CLI("logs", "web"); !strings.Contains(logs, "updated ") {
			return fmt.Errorf("log so far %q", logs)
		}
		return nil
	})
	if want := "updated config=hello2 bconf=x=1 greeting=hello all=hello2\n"; !strings.Contains(logs, want) {
		t.Errorf("log %q lacks %q: a subPath and env keep what the container started with", logs, want)
	}
	if p := d.Pod("web"); p == nil || p.Status.ContainerStatuses[0].ContainerID != started || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the container was restarted for a ConfigMap's change: %+v", p.Status.ContainerStatuses)
	}
	d.RemoveManifest("web.yaml")
	d.Eventually(30*time.Second, "pod gone", func() error {
		if len(d.Pods()) > 0 {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}

// memoryVolumes are the tmpfs mounts the daemon has of the pod's volumes
// of a plugin (kubernetes.io~secret), as its mount table lists them.
func memoryVolumes(t *testing.T, d *daemon, uid types.UID, plugin string) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", d.PID()))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		i := slices.Index(fields, "-")
		if i < 0 || i+1 >= len(fields) || fields[i+1] != "tmpfs" {
			continue
		}
		if mp := fields[4]; strings.Contains(mp, "/pods/"+string(uid)+"/volumes/"+plugin+"/") {
			out = append(out, filepath.Base(mp))
		}
	}
	return out
}

// A pod whose ConfigMap is missing waits as under the kubelet and starts
// when a file brings the ConfigMap; one whose reference is optional starts
// without it.
func TestPodWaitsForItsConfigMap(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	pod := func(name, spec string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
` + spec
	}
	d.WriteManifest("vol.yaml", pod("vol", `  volumes: [{name: v, configMap: {name: late}}]
  containers:
  - {name: main, image: busybox, command: [sh, -c, "echo K=$(cat /v/k); sleep 3600"], volumeMounts: [{name: v, mountPath: /v}]}
`))
	d.WriteManifest("env.yaml", pod("env", `  containers:
  - name: main
    image: busybox
    command: [sh, -c, "echo K=$K; sleep 3600"]
    env: [{name: K, valueFrom: {configMapKeyRef: {name: late, key: k}}}]
`))
	d.WriteManifest("opt.yaml", pod("opt", `  volumes: [{name: v, configMap: {name: late, optional: true}}, {name: s, secret: {secretName: none, optional: true}}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, "echo files=$( (ls /v; ls /s) | wc -w) K=${K-unset}; sleep 3600"]
    env: [{name: K, valueFrom: {secretKeyRef: {name: none, key: k, optional: true}}}]
    envFrom: [{configMapRef: {name: late, optional: true}}]
    volumeMounts: [{name: v, mountPath: /v}, {name: s, mountPath: /s}]
`))
	d.WaitRunning("opt", 60*time.Second)
	d.Eventually(30*time.Second, "the optional pod's report", func() error {
		if logs := d.CLI("logs", "opt"); !strings.Contains(logs, "files=0 K=unset\n") {
			return fmt.Errorf("log so far %q", logs)
		}
		return nil
	})
	waiting := func(name, reason, message string) error {
		p := d.Pod(name)
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status of %s yet", name)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != reason || (message != "" && w.Message != message) {
			return fmt.Errorf("%s: %+v, want waiting %s %q", name, p.Status.ContainerStatuses[0].State, reason, message)
		}
		return nil
	}
	d.Eventually(30*time.Second, "the pods wait", func() error {
		if err := waiting("env", "CreateContainerConfigError", `configmap "late" not found`); err != nil {
			return err
		}
		if err := waiting("vol", "ContainerCreating", ""); err != nil {
			return err
		}
		var evs v1.EventList
		if err := json.Unmarshal([]byte(d.CLI("events", "-o", "json")), &evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && e.Type == v1.EventTypeWarning && e.InvolvedObject.Name == "vol-"+d.Name &&
				e.Message == `MountVolume.SetUp failed for volume "v" : configmap "late" not found` {
				return nil
			}
		}
		return fmt.Errorf("no FailedMount event of vol in %s", d.CLI("events"))
	})

	d.WriteManifest("late.yaml", configMapDoc("late", map[string]string{"k": "here"}))
	d.WaitRunning("vol", 30*time.Second)
	d.WaitRunning("env", 30*time.Second)
	d.Eventually(30*time.Second, "the pods read the ConfigMap", func() error {
		if logs := d.CLI("logs", "vol"); logs != "K=here\n" {
			return fmt.Errorf("vol logged %q", logs)
		}
		if logs := d.CLI("logs", "env"); logs != "K=here\n" {
			return fmt.Errorf("env logged %q", logs)
		}
		return nil
	})
}

// staticpodd.io/restart-on-change: configmap/NAME restarts the pod as a new
// generation when the ConfigMap's data change, and its env follows.
func TestRestartOnConfigMapChange(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("gen.yaml", configMapDoc("gen", map[string]string{"v": "1"}))
	d.WriteManifest("app.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: app
  annotations: {staticpodd.io/restart-on-change: configmap/gen}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: [sh, -c, "echo V=$V; sleep 3600"]
    env: [{name: V, valueFrom: {configMapKeyRef: {name: gen, key: v}}}]
`)
	first := d.WaitRunning("app", 60*time.Second)
	d.WriteManifest("gen.yaml", configMapDoc("gen", map[string]string{"v": "2"}))
	d.Eventually(60*time.Second, "a new generation with the new value", func() error {
		p := d.Pod("app")
		if p == nil || p.UID == first.UID || p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("pod %v", p)
		}
		if logs := d.CLI("logs", "app"); logs != "V=2\n" {
			return fmt.Errorf("logged %q", logs)
		}
		return nil
	})
}
