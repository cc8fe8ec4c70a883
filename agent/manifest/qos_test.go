package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// qosPod is a pod with one container per resources value (YAML flow maps), and
// extra spec lines.
func qosPod(t *testing.T, extra string, resources ...string) *v1.Pod {
	t.Helper()
	doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n" + extra + "  containers:\n"
	for i, r := range resources {
		doc += "  - {name: c" + string(rune('0'+i)) + ", image: i, resources: " + r + "}\n"
	}
	return mustParse(t, doc)
}

func TestQOSClass(t *testing.T) {
	const (
		guaranteed = "{limits: {cpu: 1, memory: 1Gi}}" // requests default to limits
		burstable  = "{requests: {memory: 1Gi}}"
		none       = "{}"
	)
	for _, tc := range []struct {
		name      string
		extra     string
		resources []string
		want      v1.PodQOSClass
	}{
		{"nothing set", "", []string{none, none}, v1.PodQOSBestEffort},
		{"limits equal requests", "", []string{guaranteed, "{requests: {cpu: 500m, memory: 1Mi}, limits: {cpu: 500m, memory: 1Mi}}"}, v1.PodQOSGuaranteed},
		{"cpu only", "", []string{"{limits: {cpu: 1}}"}, v1.PodQOSBurstable},
		{"request below limit", "", []string{"{requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 2, memory: 1Gi}}"}, v1.PodQOSBurstable},
		{"request only", "", []string{burstable}, v1.PodQOSBurstable},
		{"guaranteed and best effort", "", []string{guaranteed, none}, v1.PodQOSBurstable},
		{"only other resources", "", []string{"{limits: {ephemeral-storage: 1Gi}}"}, v1.PodQOSBestEffort},
		{"init container counts", "  initContainers: [{name: i, image: i}]\n", []string{guaranteed}, v1.PodQOSBurstable},
		{"pod-level resources decide", "  resources: {requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}\n", []string{none}, v1.PodQOSGuaranteed},
	} {
		if got := QOSClass(qosPod(t, tc.extra, tc.resources...)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestOOMScoreAdj(t *testing.T) {
	const gib = 1 << 30
	capacity := func() (int64, error) { return 16 * gib, nil }
	for _, tc := range []struct {
		name      string
		extra     string
		resources []string
		want      int
	}{
		{"guaranteed", "", []string{"{limits: {cpu: 1, memory: 1Gi}}"}, -997},
		{"best effort", "", []string{"{}"}, 1000},
		// 1000 - 1000*1Gi/16Gi = 937.5, truncated as the kubelet's integers do.
		{"burstable", "", []string{"{requests: {memory: 1Gi}}"}, 938},
		{"burstable without memory request", "", []string{"{requests: {cpu: 1}}"}, 999},
		{"burstable requesting the whole machine", "", []string{"{requests: {memory: 16Gi}}"}, 3},
		{"burstable requesting more than the machine", "", []string{"{requests: {memory: 64Gi}}"}, 3},
		// A static pod is critical in the kubelet but only a node-critical one is -997.
		{"static burstable system-cluster-critical", "  priorityClassName: system-cluster-critical\n", []string{"{requests: {memory: 1Gi}}"}, 938},
		{"static best effort system-node-critical", "  priorityClassName: system-node-critical\n", []string{"{}"}, -997},
		// Pod-level request: 4Gi less the containers' 1Gi, split over 2 containers.
		{"pod-level memory request", "  resources: {requests: {memory: 4Gi}}\n", []string{"{requests: {memory: 1Gi}}", "{}"}, 844},
	} {
		pod := qosPod(t, tc.extra, tc.resources...)
		got, err := oomScoreAdj(pod, &pod.Spec.Containers[0], capacity)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}

	// The machine's memory is read only when needed, and its failure is the container's.
	broken := func() (int64, error) { return 0, errors.New("no meminfo") }
	pod := qosPod(t, "", "{limits: {cpu: 1, memory: 1Gi}}")
	if _, err := oomScoreAdj(pod, &pod.Spec.Containers[0], broken); err != nil {
		t.Errorf("guaranteed pod read the machine's memory: %v", err)
	}
	pod = qosPod(t, "", "{requests: {memory: 1Gi}}")
	if _, err := oomScoreAdj(pod, &pod.Spec.Containers[0], broken); err == nil {
		t.Error("burstable pod without the machine's memory: no error")
	}
}

// Container sets the kubelet's oom_score_adj from the machine's memory the
// caller read from a meminfo file.
func TestContainerOOMScoreAdj(t *testing.T) {
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	body := "MemTotal:       16777216 kB\nMemFree:         1000000 kB\n"
	if err := os.WriteFile(meminfo, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p := Paths{RootDir: "/r", PodLogsDir: "/l"}
	for res, want := range map[string]int{"{requests: {memory: 4Gi}}": 750, "{}": 1000, "{limits: {memory: 1Gi, cpu: 1}}": -997} {
		pod := qosPod(t, "", res)
		c, err := Container(pod, &pod.Spec.Containers[0], 0, p, hostFrom(meminfo))
		if err != nil {
			t.Fatal(err)
		}
		if c.OOMScoreAdj == nil || *c.OOMScoreAdj != want {
			t.Errorf("%s: oomScoreAdj %v, want %d", res, c.OOMScoreAdj, want)
		}
	}
	pod := qosPod(t, "", "{requests: {memory: 4Gi}}")
	if _, err := Container(pod, &pod.Spec.Containers[0], 0, p, hostFrom(filepath.Join(t.TempDir(), "missing"))); err == nil || !strings.Contains(err.Error(), "machine memory") {
		t.Errorf("missing meminfo: err = %v", err)
	}
}

// A container without a memory limit sees the machine's memory in a
// resourceFieldRef to limits.memory, in its env and its downwardAPI files,
// read from the same meminfo file that sets its oom_score_adj.
func TestNodeMemoryFromHost(t *testing.T) {
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal:        3072 kB\nMemFree: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := qosPod(t, "", "{}")
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory"}}}}
	for path, want := range map[string]string{meminfo: "3145728", filepath.Join(t.TempDir(), "missing"): "0"} {
		p, h := Paths{RootDir: "/r", PodLogsDir: "/l"}, hostFrom(path)
		got, err := Container(pod, c, 0, p, h)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Env) != 1 || got.Env[0].Value != want {
			t.Errorf("meminfo %s: env %v, want MEM=%s", path, got.Env, want)
		}
		src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: c.Name, Resource: "limits.memory"}},
		}}
		v, err := DownwardAPIValue(pod, &src.Items[0], h)
		if err != nil {
			t.Fatal(err)
		}
		if v != want {
			t.Errorf("meminfo %s: downwardAPI file mem %q, want %q", path, v, want)
		}
	}
}
