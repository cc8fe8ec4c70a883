package manifest

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/host"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// machine is what the daemon passes a conversion of this machine: its
// memory, as the agent reads it.
func machine(t *testing.T) Host {
	t.Helper()
	m, err := host.ReadMemory(host.Meminfo)
	if err != nil {
		t.Fatal(err)
	}
	return Host{CPUs: runtime.NumCPU(), Memory: func() (int64, error) { return int64(m.Total), nil }}
}

// hostFrom is what the agent passes a conversion when the machine's memory
// is read from the meminfo file path.
func hostFrom(path string) Host {
	return Host{CPUs: runtime.NumCPU(), Memory: func() (int64, error) {
		m, err := host.ReadMemory(path)
		return int64(m.Total), err
	}}
}

func mustParse(t *testing.T, doc string) *v1.Pod {
	t.Helper()
	pods, _, err := ParseFile([]byte(doc), "/m/p.yaml", "node1")
	if err != nil {
		t.Fatal(err)
	}
	return pods[0].Pod
}

const envPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: edge
  uid: "0123"
  labels: {app: web}
spec:
  volumes:
  - {name: data, hostPath: {path: /srv/data, type: DirectoryOrCreate}}
  - {name: scratch, emptyDir: {}}
  - {name: fast, emptyDir: {medium: Memory, sizeLimit: 64Mi}}
  securityContext: {runAsUser: 1000, runAsGroup: 1000, supplementalGroups: [5]}
  containers:
  - name: app
    image: busybox:1.36
    command: ["/bin/sh", "-c", "echo $(GREETING) $(MISSING) $$(GREETING)"]
    args: ["$(POD)"]
    env:
    - {name: NAME, value: world}
    - {name: GREETING, value: "hello $(NAME)"}
    - {name: EARLY, value: "$(LATER)"}
    - {name: LATER, value: x}
    - {name: ESCAPED, value: "$$(NAME)"}
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: APP, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
    - {name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
    - {name: scratch, mountPath: /scratch, subPath: app}
    - {name: fast, mountPath: /fast}
    resources:
      limits: {cpu: 500m, memory: 128Mi}
      requests: {cpu: 250m}
    securityContext:
      runAsUser: 2000
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {add: [NET_ADMIN], drop: [ALL]}
`

func TestContainer(t *testing.T) {
	pod := mustParse(t, envPod)
	pod.Status.PodIP = "10.0.0.7"
	p := Paths{RootDir: "/var/lib/staticpodd", PodLogsDir: "/var/log/pods"}
	c, err := Container(pod, &pod.Spec.Containers[0], 3, p, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	wantEnv := map[string]string{
		"NAME": "world", "GREETING": "hello world", "EARLY": "$(LATER)", "LATER": "x",
		"ESCAPED": "$(NAME)", "POD": "web-node1", "NS": "edge", "UID": "0123", "NODE": "node1",
		"APP": "web", "POD_IP": "10.0.0.7", "MEM": "128", "CPU": "1",
	}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("env = %v\nwant %v", env, wantEnv)
	}
	if c.Env[0].Name != "NAME" || c.Env[len(c.Env)-1].Name != "CPU" {
		t.Errorf("env order not kept: %v", c.Env)
	}
	if want := []string{"/bin/sh", "-c", "echo hello world $(MISSING) $(GREETING)"}; !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command = %q, want %q", c.Command, want)
	}
	if want := []string{"web-node1"}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("args = %q", c.Args)
	}
	uid := string(pod.UID)
	wantMounts := []podspec.Mount{
		{Destination: "/data", Type: "bind", Source: "/srv/data", ReadOnly: true},
		{Destination: "/scratch", Type: "bind", Source: "/var/lib/staticpodd/pods/" + uid + "/volumes/kubernetes.io~empty-dir/scratch", SubPath: "app"},
		{Destination: "/fast", Type: "bind", Source: "/var/lib/staticpodd/pods/" + uid + "/volumes/kubernetes.io~empty-dir/fast"},
	}
	if !reflect.DeepEqual(c.Mounts, wantMounts) {
		t.Errorf("mounts = %+v\nwant %+v", c.Mounts, wantMounts)
	}
	wantRes := podspec.Resources{MemoryLimit: 128 << 20, CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000}
	if c.Resources != wantRes {
		t.Errorf("resources = %+v, want %+v", c.Resources, wantRes)
	}
	s := c.Security
	if *s.RunAsUser != 2000 || *s.RunAsGroup != 1000 || !reflect.DeepEqual(s.SupplementalGroups, []int64{5}) ||
		!s.NoNewPrivileges || !s.ReadOnlyRootFilesystem || s.Privileged ||
		!reflect.DeepEqual(s.CapAdd, []string{"NET_ADMIN"}) || !reflect.DeepEqual(s.CapDrop, []string{"ALL"}) {
		t.Errorf("security = %+v", s)
	}
	if want := "/var/log/pods/edge_web-node1_0123/app/3.log"; c.LogPath != want {
		t.Errorf("log path = %q, want %q", c.LogPath, want)
	}
	if c.Image != "docker.io/library/busybox:1.36" || c.Attempt != 3 || c.Name != "app" || len(c.Hash) != 32 {
		t.Errorf("image %q attempt %d name %q hash %q", c.Image, c.Attempt, c.Name, c.Hash)
	}
}

func TestResourcesWithoutRequests(t *testing.T) {
	for _, tc := range []struct {
		res  string
		want podspec.Resources
	}{
		{"{}", podspec.Resources{CPUShares: 2}},
		{"{limits: {cpu: '2'}}", podspec.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000}},
		{"{requests: {cpu: 1m}}", podspec.Resources{CPUShares: 2}},
		{"{limits: {cpu: 1m}}", podspec.Resources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000}},
	} {
		pod := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i, resources: "+tc.res+"}]\n")
		c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{RootDir: "/r", PodLogsDir: "/l"}, machine(t))
		if err != nil {
			t.Fatal(err)
		}
		if c.Resources != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.res, c.Resources, tc.want)
		}
		if c.Command != nil || c.Args != nil {
			t.Errorf("nil command and args must stay nil (image entrypoint): %q %q", c.Command, c.Args)
		}
	}
}

func TestRunAsNonRootWithRoot(t *testing.T) {
	pod := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  securityContext: {runAsNonRoot: true}\n  containers: [{name: c, image: i, securityContext: {runAsUser: 0}}]\n")
	if _, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{}, machine(t)); err == nil || !strings.Contains(err.Error(), "container's runAsUser breaks non-root policy") {
		t.Errorf("err = %v", err)
	}
}

// runAsNonRoot reaches the runtime, which checks the image's user: the pod's
// value, unless the container's says otherwise.
func TestRunAsNonRoot(t *testing.T) {
	for _, tc := range []struct {
		pod, ctr string
		want     bool
	}{
		{"", "", false},
		{"{runAsNonRoot: true}", "", true},
		{"{runAsNonRoot: true}", "{runAsNonRoot: false}", false},
		{"{runAsNonRoot: false}", "{runAsNonRoot: true}", true},
		{"", "{runAsNonRoot: true}", true},
	} {
		doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
		if tc.pod != "" {
			doc += "  securityContext: " + tc.pod + "\n"
		}
		doc += "  containers: [{name: c, image: i"
		if tc.ctr != "" {
			doc += ", securityContext: " + tc.ctr
		}
		doc += "}]\n"
		pod := mustParse(t, doc)
		c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{}, machine(t))
		if err != nil {
			t.Fatal(err)
		}
		if c.Security.RunAsNonRoot != tc.want {
			t.Errorf("pod %q container %q: runAsNonRoot = %v, want %v", tc.pod, tc.ctr, c.Security.RunAsNonRoot, tc.want)
		}
	}
}

func TestSandbox(t *testing.T) {
	pod := mustParse(t, envPod)
	s := Sandbox(pod, Paths{PodLogsDir: "/logs"})
	want := &podspec.Pod{UID: "0123", Namespace: "edge", Name: "web-node1", Hostname: "web-node1", LogDir: "/logs/edge_web-node1_0123",
		TerminationGracePeriod: 30 * time.Second, // the default
		// Burstable (requests below limits), every limit declared: the pod
		// cgroup gets the sums, as the kubelet's ResourceConfigForPod.
		Resources: podspec.Resources{MemoryLimit: 128 << 20, CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("sandbox = %+v, want %+v", s, want)
	}
	zero := int64(0)
	pod.Spec.TerminationGracePeriodSeconds = &zero
	if s := Sandbox(pod, Paths{}); s.TerminationGracePeriod != 2*time.Second {
		t.Errorf("grace period %v for terminationGracePeriodSeconds 0, want the kubelet's minimum 2s", s.TerminationGracePeriod)
	}
	pod.Spec.HostNetwork = true
	if s := Sandbox(pod, Paths{}); s.Hostname != "" || !s.HostNetwork {
		t.Errorf("hostNetwork sandbox = %+v", s)
	}
}

// A container's image reaches the runtime spelled in full, as the image store
// records references.
func TestContainerImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		"nginx":                        "docker.io/library/nginx:latest",
		"registry.k8s.io/etcd:3.5.9-0": "registry.k8s.io/etcd:3.5.9-0",
		"localhost:5000/app":           "localhost:5000/app:latest",
		"busybox:1@" + digest:          "docker.io/library/busybox@" + digest,
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: in}}}}
		c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{}, machine(t))
		if err != nil {
			t.Fatal(err)
		}
		if c.Image != want {
			t.Errorf("image %q reaches the runtime as %q, want %q", in, c.Image, want)
		}
	}
}

// subPathExpr expands with the container's env as the kubelet's
// ExpandContainerVolumeMounts does; what it gives is checked like a subPath.
func TestSubPathExpr(t *testing.T) {
	const doc = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  volumes: [{name: v, emptyDir: {}}]
  containers:
  - name: c
    image: i
    env:
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: UP, value: ".."}
    - {name: ABS, value: "/etc"}
    - {name: EMPTY, value: ""}
    volumeMounts: [{name: v, mountPath: /x, subPathExpr: %s}]
`
	for _, tc := range []struct{ expr, want, err string }{
		{"logs/$(POD)", "logs/p-node1", ""},
		{"a/./b/", "a/b", ""},
		{"$(UP)/x", "", `subPath "../x" must not contain '..'`},
		{"$(ABS)", "", `subPath "/etc" must not be an absolute path`},
		{"d/$(NOPE)/$(EMPTY)", "", "missing value for EMPTY, NOPE"},
	} {
		pod := mustParse(t, fmt.Sprintf(doc, tc.expr))
		c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{RootDir: "/r"}, machine(t))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "volumeMount v") {
				t.Errorf("%s: err = %v, want %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if m := c.Mounts[0]; m.SubPath != tc.want || m.Source != "/r/pods/"+string(pod.UID)+"/volumes/kubernetes.io~empty-dir/v" {
			t.Errorf("%s: mount %+v, want subPath %q inside the volume", tc.expr, m, tc.want)
		}
	}
}

// The stop signal and the termination message settings reach the runtime;
// defaults give /dev/termination-log read as a file, and SIGTERM (0: the
// image's, else SIGTERM).
func TestContainerStopAndTermination(t *testing.T) {
	pod := mustParse(t, `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  os: {name: linux}
  terminationGracePeriodSeconds: 5
  containers:
  - name: plain
    image: busybox
  - name: custom
    image: busybox
    terminationMessagePath: var/run/msg
    terminationMessagePolicy: FallbackToLogsOnError
    lifecycle:
      stopSignal: SIGRTMIN+2
      postStart: {httpGet: {port: 80}}
      preStop: {sleep: {seconds: 5}}
`)
	p := Paths{RootDir: "/var/lib/staticpodd", PodLogsDir: "/var/log/pods"}
	plain, err := Container(pod, &pod.Spec.Containers[0], 0, p, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	if plain.StopSignal != 0 || plain.TerminationMessagePath != "/dev/termination-log" || plain.TerminationMessageFromLog {
		t.Errorf("defaults: stop signal %d, message path %q, from log %v", plain.StopSignal, plain.TerminationMessagePath, plain.TerminationMessageFromLog)
	}
	custom, err := Container(pod, &pod.Spec.Containers[1], 0, p, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	if custom.StopSignal != 36 || custom.TerminationMessagePath != "/var/run/msg" || !custom.TerminationMessageFromLog {
		t.Errorf("custom: stop signal %d, message path %q, from log %v", custom.StopSignal, custom.TerminationMessagePath, custom.TerminationMessageFromLog)
	}
	if g := pod.Spec.Containers[1].Lifecycle.PostStart.HTTPGet; g.Path != "/" || g.Scheme != v1.URISchemeHTTP {
		t.Errorf("httpGet hook defaults: path %q scheme %q", g.Path, g.Scheme)
	}
}

// A container with a preStop hook keeps it, and its ports, in annotations
// the runtime gives back: enough to run the hook once the manifest is gone.
func TestStopAnnotations(t *testing.T) {
	pod := mustParse(t, `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: hooked
    image: busybox
    ports: [{name: admin, containerPort: 9000}]
    lifecycle:
      preStop: {httpGet: {path: /quit, port: admin}}
  - name: plain
    image: busybox
`)
	p := Paths{RootDir: "/var/lib/staticpodd", PodLogsDir: "/var/log/pods"}
	hooked, err := Container(pod, &pod.Spec.Containers[0], 0, p, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	got := RestoreContainer("hooked", hooked.Annotations)
	want := v1.Container{Name: "hooked", Ports: pod.Spec.Containers[0].Ports, Lifecycle: &v1.Lifecycle{PreStop: pod.Spec.Containers[0].Lifecycle.PreStop}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restored %+v\nwant %+v", got, want)
	}
	plain, err := Container(pod, &pod.Spec.Containers[1], 0, p, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Annotations != nil {
		t.Errorf("a container without preStop has annotations %v", plain.Annotations)
	}
}

// A fileKeyRef is left for the runtime to read when the container starts,
// from the named emptyDir of the pod.
func TestContainerEnvFileKeyRef(t *testing.T) {
	pods, _, err := ParseFile([]byte(`apiVersion: v1
kind: Pod
metadata: {name: p, uid: u1}
spec:
  volumes: [{name: config, emptyDir: {}}]
  containers:
  - name: c
    image: busybox
    env:
    - {name: A, value: a}
    - {name: B, valueFrom: {fileKeyRef: {volumeName: config, path: sub/config.env, key: K, optional: true}}}
`), "/m/p.yaml", "n")
	if err != nil {
		t.Fatal(err)
	}
	pod := pods[0].Pod
	c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{RootDir: "/r", PodLogsDir: "/l"}, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	want := podspec.EnvFile{Dir: "/r/pods/u1/volumes/kubernetes.io~empty-dir/config", Path: "sub/config.env", Key: "K", Optional: true}
	if len(c.Env) != 2 || c.Env[1].File == nil || *c.Env[1].File != want || c.Env[1].Value != "" {
		t.Fatalf("env %+v, want B to come from %+v", c.Env, want)
	}
}
