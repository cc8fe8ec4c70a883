//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/staticpodd/staticpodd/tests/kubeapi"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The edit both sides get at the same instant, to time the updates: the
// ConfigMap's color and the Secret's password.
var objectEdits = strings.NewReplacer("color: blue", "color: green", "password: s3cret-1", "password: s3cret-2")

// seenUpdated is what the pod's "seen" file says once every mount that
// follows updates shows the edit: all but the subPath file, which keeps the
// value it was started with, as under the kubelet.
const seenUpdated = `settings/color green
items/colors/current green
projected/color green
credentials/password s3cret-2
projected/secret/password s3cret-2
color blue
`

// TestObjectsAgainstKubelet runs the pod of testdata/objects, which uses a
// ConfigMap and a Secret in every way a pod can (configMap, secret and
// projected volumes with items and modes, an optional missing one, env
// valueFrom and envFrom with prefixes, optional missing references, a
// subPath, fsGroup; and again as root without fsGroup), and two pods waiting for a ConfigMap not there yet,
// under the real kubelet as regular pods whose objects
// come from a real API server, and under staticpodd as a static pod with the
// same objects in a file beside it. The kubelet cannot do this with a static
// pod, so the API path is the reference. Each pod reports what it sees; the
// reports are compared entry by entry (AtomicWriter timestamps normalised),
// differences not in objects-intended.txt fail; the waiting pods' states
// must be the same, and the time until they run once their ConfigMap is
// created on both sides is measured. Then both sides' objects are
// edited at the same instant, and the time until each mount shows the edit
// is measured on each side; a second report compares the layout after the
// update and shows env and subPath unchanged.
func TestObjectsAgainstKubelet(t *testing.T) {
	intended, err := ParseIntended("objects-intended.txt")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckParagraphs(intended, string(docs)); err != nil {
		t.Fatal(err)
	}
	objectsYAML := readFile(t, "testdata/objects/objects.yaml")
	podYAML := readFile(t, "testdata/objects/pod.yaml")
	// The same pod without its securityContext: run as root, no fsGroup,
	// so that the volumes' owners and modes without one are compared too.
	rootYAML := strings.Replace(podYAML, "  securityContext: {runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000}\n", "", 1)
	rootYAML = strings.Replace(rootYAML, "  name: objects\n", "  name: objects-root\n", 1)
	if strings.Count(rootYAML, "\n") != strings.Count(podYAML, "\n")-1 || !strings.Contains(rootYAML, "objects-root") {
		t.Fatal("pod.yaml's securityContext or name is not where the test derives objects-root from it")
	}
	start := time.Now()

	// The kubelet's side: a real API server, the objects and the pod on
	// it, the kubelet registered as node "conformance".
	api := kubeapi.Start(t)
	ctx := context.Background()
	// The ServiceAccount admission plugin wants the namespace's default
	// service account, which the controller manager (not run here) makes.
	if _, err := api.Admin.CoreV1().ServiceAccounts("default").Create(ctx,
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !errors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	putObjects(t, api.Admin, objectsYAML)
	k := startKubelet(t, api.NodeKubeconfig(nodeName, api.Server()))
	kubeletOut, kubeletRootOut := outDir(t), outDir(t)
	bindPod(t, api.Admin, strings.ReplaceAll(podYAML, "path: OUT", "path: "+kubeletOut))
	bindPod(t, api.Admin, strings.ReplaceAll(rootYAML, "path: OUT", "path: "+kubeletRootOut))
	for _, late := range latePods {
		bindPod(t, api.Admin, readFile(t, "testdata/objects/"+late+".yaml"))
	}

	// staticpodd's side: the same objects in a file beside the pod.
	d := testdaemon.New(t)
	d.Name = nodeName
	d.Start()
	ourOut, ourRootOut := outDir(t), outDir(t)
	d.WriteManifest("objects.yaml", objectsYAML)
	d.WriteManifest("pod.yaml", strings.ReplaceAll(podYAML, "path: OUT", "path: "+ourOut))
	d.WriteManifest("pod-root.yaml", strings.ReplaceAll(rootYAML, "path: OUT", "path: "+ourRootOut))
	for _, late := range latePods {
		d.WriteManifest(late+".yaml", readFile(t, "testdata/objects/"+late+".yaml"))
	}

	sides := func(what string) string {
		return fmt.Sprintf("%s\nthe kubelet's pod: %s\nstaticpodd's pods: %s\nstaticpodd's output (end):\n%s\ncontainerd's and the kubelet's output (end):\n%s",
			what, statusOf(k.pods(t)), statusOf(d.Pods()), d.OutputTail(), k.tail())
	}
	theirs, ours := waitFiles(t, 2*time.Minute, filepath.Join(kubeletOut, "report"), filepath.Join(ourOut, "report"), sides)
	t.Logf("both pods reported %.1fs after the test's start; the kubelet's pod's report:\n%s", time.Since(start).Seconds(), theirs)
	compareReports(t, "objects", intended, theirs, ours)
	theirs, ours = waitFiles(t, time.Minute, filepath.Join(kubeletRootOut, "report"), filepath.Join(ourRootOut, "report"), sides)
	compareReports(t, "objects-root", intended, theirs, ours)

	// The pods whose ConfigMap is missing wait as the kubelet's do, with
	// its words, and start once it is created on both sides at once.
	ourPods := func() []v1.Pod { return d.Pods() }
	kubeletPods := func() []v1.Pod { return k.pods(t) }
	waitAll(t, "the late pods waiting for their ConfigMap", time.Minute, ourPods, kubeletPods, map[string]func(*v1.Pod) error{
		"late-env":    waiting("main", "CreateContainerConfigError"),
		"late-volume": waiting("main", "ContainerCreating"),
	})
	for _, late := range latePods {
		theirs, ours := containerStatus(podNamed(k.pods(t), late), "main"), containerStatus(podNamed(d.Pods(), late), "main")
		t.Logf("%s waits: kubelet %s %q, staticpodd %s %q", late, theirs.State.Waiting.Reason, theirs.State.Waiting.Message, ours.State.Waiting.Reason, ours.State.Waiting.Message)
		waitingFields := func(w *v1.ContainerStateWaiting) []Field {
			return []Field{{"waiting.reason", w.Reason}, {"waiting.message", w.Message}}
		}
		ds := Compare(late, waitingFields(theirs.State.Waiting), waitingFields(ours.State.Waiting))
		Explain(ds, intended)
		for _, diff := range ds {
			if diff.Explained == nil {
				t.Errorf("%s: a difference from the kubelet that objects-intended.txt does not list", diff)
			}
		}
	}
	lateYAML := readFile(t, "testdata/objects/late.yaml")
	arrival := time.Now()
	putObjects(t, api.Admin, lateYAML)
	d.WriteManifest("late.yaml", lateYAML)
	started := map[string]time.Duration{}
	for end := arrival.Add(time.Minute); len(started) < 2*len(latePods); time.Sleep(50 * time.Millisecond) {
		for side, pods := range map[string]func() []v1.Pod{"kubelet": kubeletPods, "staticpodd": ourPods} {
			list := pods()
			for _, late := range latePods {
				if _, done := started[side+" "+late]; done {
					continue
				}
				if p := podNamed(list, late); p != nil && containerReady("main")(p) == nil {
					started[side+" "+late] = time.Since(arrival)
				}
			}
		}
		if time.Now().After(end) {
			t.Fatal(sides(fmt.Sprintf("the late pods not running 1m after their ConfigMap was created (started: %v)", started)))
		}
	}
	for _, late := range latePods {
		t.Logf("FIGURE objects: %s running after its missing ConfigMap was created: kubelet %.2fs, staticpodd %.2fs",
			late, started["kubelet "+late].Seconds(), started["staticpodd "+late].Seconds())
	}

	// The edit, on both sides at once: the API server's objects updated,
	// staticpodd's file replaced.
	edited := objectEdits.Replace(objectsYAML)
	edit := time.Now()
	putObjects(t, api.Admin, edited)
	d.WriteManifest("objects.yaml", edited)
	// When each side's pod first shows each line of seenUpdated: the
	// volumes may see the edit at different times, and a side that never
	// sees some is told apart from one that is slow.
	want := strings.Split(strings.TrimSuffix(seenUpdated, "\n"), "\n")
	seenAt := map[string]map[string]time.Duration{"kubelet": {}, "staticpodd": {}}
	outs := map[string]string{"kubelet": kubeletOut, "staticpodd": ourOut}
	for end := edit.Add(time.Minute); len(seenAt["kubelet"]) < len(want) || len(seenAt["staticpodd"]) < len(want); time.Sleep(10 * time.Millisecond) {
		for side, dir := range outs {
			b, _ := os.ReadFile(filepath.Join(dir, "seen"))
			for _, line := range strings.Split(string(b), "\n") {
				if _, ok := seenAt[side][line]; !ok && slices.Contains(want, line) {
					seenAt[side][line] = time.Since(edit)
				}
			}
		}
		if time.Now().After(end) {
			b1, _ := os.ReadFile(filepath.Join(kubeletOut, "seen"))
			b2, _ := os.ReadFile(filepath.Join(ourOut, "seen"))
			t.Fatal(sides(fmt.Sprintf("the edit not seen in every volume after 1m (seen after: %v): the kubelet's pod sees\n%s\nstaticpodd's pod sees\n%s\nwant\n%s", seenAt, b1, b2, seenUpdated)))
		}
	}
	for side, dir := range outs {
		// The subPath file kept its value all along.
		if b, _ := os.ReadFile(filepath.Join(dir, "seen")); string(b) != seenUpdated {
			t.Errorf("%s: the pod sees, after the edit,\n%s\nwant\n%s", side, b, seenUpdated)
		}
	}
	last := func(side string) time.Duration { return slices.Max(slices.Collect(maps.Values(seenAt[side]))) }
	t.Logf("FIGURE objects: an edited ConfigMap and Secret seen in every mounted volume after: kubelet (API server, syncFrequency 5s) %.2fs, staticpodd (file beside the pod) %.2fs; each volume: %v",
		last("kubelet").Seconds(), last("staticpodd").Seconds(), seenAt)

	for _, dir := range []string{kubeletOut, ourOut} {
		if err := os.WriteFile(filepath.Join(dir, "again"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	theirs, ours = waitFiles(t, time.Minute, filepath.Join(kubeletOut, "report2"), filepath.Join(ourOut, "report2"), sides)
	for side, report := range map[string]string{"kubelet": theirs, "staticpodd": ours} {
		// Env and subPath files keep what the container started with.
		for _, want := range []string{"\nCM_COLOR=blue\n", "\nSECRET_PASSWORD=s3cret-1\n", "# subPath /etc/color\nblue\n"} {
			if !strings.Contains(report, want) {
				t.Errorf("%s: the report after the edit has no %q:\n%s", side, want, report)
			}
		}
	}
	compareReports(t, "objects-edited", intended, theirs, ours)
	for _, in := range intended {
		if in.Used == 0 {
			t.Logf("objects-intended.txt:%d (%s %s) explained no difference in this run", in.Line, in.Pod, in.Field)
		}
	}
	t.Logf("FIGURE objects: the comparison took %.1fs (API server, kubelet, both pods, the edit)", time.Since(start).Seconds())
}

// latePods are the pods of testdata/objects that wait for the ConfigMap of
// late.yaml.
var latePods = []string{"late-env", "late-volume"}

// bindPod creates the pod of manifest on the API server, bound to the
// kubelet's node under the name staticpodd gives the static pod, so that
// both sides show the same metadata.name; it is deleted before the
// kubelet's cleanup, which waits for its pods to be gone.
func bindPod(t *testing.T, c kubernetes.Interface, manifest string) {
	t.Helper()
	var pod v1.Pod
	if err := yaml.UnmarshalStrict([]byte(manifest), &pod); err != nil {
		t.Fatal(err)
	}
	pod.Name += "-" + nodeName
	pod.Spec.NodeName = nodeName
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(context.Background(), &pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
}

// podNamed is the pod of pods made from the manifest name, or nil.
func podNamed(pods []v1.Pod, name string) *v1.Pod {
	for i := range pods {
		if pods[i].Name == name+"-"+nodeName {
			return &pods[i]
		}
	}
	return nil
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// outDir is a directory the pod's user (uid 1000) may write.
func outDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// putObjects creates or updates on the API server each ConfigMap and Secret
// of the YAML documents of objects.
func putObjects(t *testing.T, c kubernetes.Interface, objects string) {
	t.Helper()
	ctx := context.Background()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(objects), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		switch raw["kind"] {
		case "ConfigMap":
			var cm v1.ConfigMap
			if err := yaml.UnmarshalStrict(b, &cm); err != nil {
				t.Fatal(err)
			}
			cms := c.CoreV1().ConfigMaps(cm.Namespace)
			if _, err = cms.Update(ctx, &cm, metav1.UpdateOptions{}); errors.IsNotFound(err) {
				_, err = cms.Create(ctx, &cm, metav1.CreateOptions{})
			}
		case "Secret":
			var s v1.Secret
			if err := yaml.UnmarshalStrict(b, &s); err != nil {
				t.Fatal(err)
			}
			secrets := c.CoreV1().Secrets(s.Namespace)
			if _, err = secrets.Update(ctx, &s, metav1.UpdateOptions{}); errors.IsNotFound(err) {
				_, err = secrets.Create(ctx, &s, metav1.CreateOptions{})
			}
		default:
			t.Fatalf("objects.yaml: a %v", raw["kind"])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitFiles waits until both files exist and returns their contents; on a
// timeout, it fails with sides' account of both.
func waitFiles(t *testing.T, timeout time.Duration, kubelet, ours string, sides func(string) string) (string, string) {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		k, kerr := os.ReadFile(kubelet)
		o, oerr := os.ReadFile(ours)
		if kerr == nil && oerr == nil {
			return string(k), string(o)
		}
		if time.Now().After(end) {
			t.Fatal(sides(fmt.Sprintf("waited %s for %s and %s: %v; %v", timeout, kubelet, ours, kerr, oerr)))
		}
	}
}

// statusOf is a line on each pod's phase and its containers' states.
func statusOf(pods []v1.Pod) string {
	var b bytes.Buffer
	for _, p := range pods {
		fmt.Fprintf(&b, "\n  %s: %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting %s: %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Running != nil:
				fmt.Fprintf(&b, "; %s running", c.Name)
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, "; %s terminated %s (%d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
		}
	}
	return b.String()
}

// compareReports fails t on every difference between the two pods' reports
// that intended does not explain.
func compareReports(t *testing.T, report string, intended []*Intended, kubelet, ours string) {
	t.Helper()
	ds := Compare(report, ParseReport(kubelet), ParseReport(ours))
	Explain(ds, intended)
	var unexplained, explained []string
	for _, d := range ds {
		if d.Explained == nil {
			unexplained = append(unexplained, d.String())
		} else {
			explained = append(explained, fmt.Sprintf("%s (%s)", d, d.Explained.Para))
		}
	}
	t.Logf("%s: %d entries of the kubelet's; %d intended differences:\n  %s", report, len(ParseReport(kubelet)), len(explained), strings.Join(explained, "\n  "))
	if len(unexplained) > 0 {
		t.Errorf("%s: %d differences from the kubelet that objects-intended.txt does not list:\n  %s\nstaticpodd's pod's report:\n%s",
			report, len(unexplained), strings.Join(unexplained, "\n  "), ours)
	}
}
