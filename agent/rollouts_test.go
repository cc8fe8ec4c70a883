package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/rollout"
	"github.com/staticpodd/staticpodd/agent/source"
)

// rolloutPod parses a manifest of pod web whose one container is named
// ctrName, as the file source does, and offers it to seen.
func rolloutPod(t *testing.T, seen *SeenStore, ctrName, image string, extra ...string) manifest.Pod {
	t.Helper()
	const origin = "/etc/kubernetes/manifests/web.yaml"
	data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    staticpodd.io/rollback-after: 30s\n" +
		"spec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: " + ctrName + "\n    image: " + image + "\n" + strings.Join(extra, "")
	p := manifest.Check([]byte(data), manifest.SourceFile, origin, testNode)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	pod := p.Pods[0]
	manifest.Stamp(pod, seen.Seen)
	seen.Offer(manifest.SourceFile, []source.Manifest{{UID: pod.UID, Source: manifest.SourceFile, Origin: origin, Data: []byte(data)}})
	return pod
}

// rolledBackEvents are the messages of the RolledBack events about the pod
// of UID running.
func rolledBackEvents(h *harness, running types.UID) []string {
	var out []string
	for _, e := range h.a.Events().List() {
		if e.Reason == events.RolledBack && e.InvolvedObject.UID == running {
			out = append(out, e.Message)
		}
	}
	return out
}

func problemsOf(h *harness) string {
	var b strings.Builder
	for _, p := range h.a.Problems() {
		b.WriteString(p.Err.Error() + "\n")
	}
	return b.String()
}

// An edit whose pod is not Ready within its rollback-after is stopped, the
// last Ready generation runs again, and the file is flagged until it
// changes; if that generation fails too, it is left running.
func TestRollbackAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["broken"] = 3
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})

		good := rolloutPod(t, seen, "web", "good")
		h.send([]manifest.Pod{good})
		if p := h.pod("web"); !podReady(&p) {
			t.Fatalf("the first generation is not Ready: %+v", p.Status.Conditions)
		}
		bad := rolloutPod(t, seen, "broken", "good")
		h.send([]manifest.Pod{bad})
		if p := h.pod("web"); p.UID != bad.UID {
			t.Fatalf("running %s, want the edit %s", p.UID, bad.UID)
		}
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if ev := rolledBackEvents(h, good.UID); len(ev) != 0 {
			t.Fatalf("rolled back before the deadline: %q", ev)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != good.UID {
			t.Fatalf("running %s after the deadline, want the last Ready generation %s", p.UID, good.UID)
		}
		ev := rolledBackEvents(h, good.UID)
		if len(ev) != 1 || !strings.Contains(ev[0], "not Ready within 30s") || !strings.Contains(ev[0], "exit code 3") {
			t.Fatalf("RolledBack events %q, want one with the exit code", ev)
		}
		if pr := problemsOf(h); !strings.Contains(pr, "rolled back (deadline) to generation "+string(good.UID)) {
			t.Fatalf("problems %q", pr)
		}
		// The pod's status says it too, so its mirror pod does.
		if c := rolledBackCondition(h.pod("web")); c == nil || c.Status != v1.ConditionTrue || c.Reason != "RolledBack" ||
			!strings.Contains(c.Message, "to generation "+string(good.UID)+": not Ready within 30s") || c.LastTransitionTime.IsZero() {
			t.Fatalf("RolledBack condition %+v", c)
		}
		if s := h.a.Summary(); !strings.Contains(s, "rolled back: default/web-node1") {
			t.Fatalf("STATUS %q", s)
		}
		if err, _ := h.a.RolloutTrouble(); err == nil {
			t.Fatal("no rollout trouble for /healthz?verbose")
		}
		// The history outlives the agent: a new one reads it back.
		hist, err := h.a.Rollout("default", "web-node1")
		if err != nil || len(hist.Generations) != 2 || hist.Rejected == nil {
			t.Fatalf("history %v %+v", err, hist)
		}
		if _, err := os.Stat(filepath.Join(root, "rollouts", "default_web-node1.json")); err != nil {
			t.Fatal(err)
		}

		// The old generation fails too: no loop.
		rt.mu.Lock()
		rt.crash["web"] = 4
		for id, c := range rt.ctrs {
			if c.st.PodUID == string(good.UID) {
				rt.exitLocked(rt.ctrs[id], 4)
			}
		}
		rt.mu.Unlock()
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != good.UID {
			t.Fatalf("running %s, want the rollback left running", p.UID)
		}
		if ev := rolledBackEvents(h, good.UID); len(ev) != 2 || !strings.Contains(ev[1], "never loops") {
			t.Fatalf("RolledBack events %q", ev)
		}
		if pr := problemsOf(h); !strings.Contains(pr, "brought back, not Ready within 30s") || !strings.Contains(pr, "never loops") {
			t.Fatalf("problems do not say the rollback failed too: %q", pr)
		}

		// An edit of the file lifts the flag.
		delete(rt.crash, "web")
		fixed := rolloutPod(t, seen, "web", "fixed")
		h.send([]manifest.Pod{fixed})
		if p := h.pod("web"); p.UID != fixed.UID {
			t.Fatalf("running %s, want the new edit %s", p.UID, fixed.UID)
		}
		if pr := problemsOf(h); pr != "" {
			t.Fatalf("problems left: %q", pr)
		}
		if c := rolledBackCondition(h.pod("web")); c != nil {
			t.Fatalf("RolledBack condition left after the edit: %+v", c)
		}
	})
}

func rolledBackCondition(p v1.Pod) *v1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == ConditionRolledBack {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// The condition's message carries a reason the pod controls (its probe's
// output): it is bounded, and only the generation run instead shows it.
func TestRolledBackConditionBounded(t *testing.T) {
	r := newRollouts("")
	h := r.historyLocked("default", "web")
	t0 := time.Unix(1000, 0)
	h.Generations = []rollout.Generation{
		{UID: "good", StartedAt: t0, ReadyAt: t0, Manifest: "x"},
		{UID: "bad", StartedAt: t0.Add(time.Minute)},
	}
	h.Fail("bad", t0.Add(2*time.Minute), strings.Repeat("\xff\u00e9", 100_000), nil, rollout.ByDeadline, &h.Generations[0])
	if c := r.condition("default/web", &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "bad"}}); c != nil {
		t.Fatalf("the rejected generation shows %+v", c)
	}
	c := r.condition("default/web", &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "good"}})
	if c == nil || len(c.Message) > maxConditionMessage || !utf8.ValidString(c.Message) || !strings.HasSuffix(c.Message, "(cut)") {
		t.Fatalf("condition %+v", c)
	}
	if !c.LastTransitionTime.Time.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("transition %v, want when the generation failed", c.LastTransitionTime)
	}
	if _, changed := h.Offered("fixed", ""); !changed || r.condition("default/web", &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "good"}}) != nil {
		t.Fatal("the condition outlives the edit that lifts the rejection")
	}
}

// `rollout undo` brings back the previous Ready generation, flagged as a
// rollback until the file changes.
func TestRolloutUndo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		v1 := rolloutPod(t, seen, "web", "v1")
		h.send([]manifest.Pod{v1})
		v2 := rolloutPod(t, seen, "web", "v2")
		h.send([]manifest.Pod{v2})
		if p := h.pod("web"); p.UID != v2.UID || !podReady(&p) {
			t.Fatalf("v2 not running Ready: %s", p.UID)
		}
		g, err := h.a.Undo("default", "web-node1")
		if err != nil || g.UID != string(v1.UID) {
			t.Fatalf("undo: %v %+v", err, g)
		}
		synctest.Wait()
		if p := h.pod("web"); p.UID != v1.UID {
			t.Fatalf("running %s after undo, want %s", p.UID, v1.UID)
		}
		if pr := problemsOf(h); !strings.Contains(pr, "rolled back (undo)") {
			t.Fatalf("problems %q", pr)
		}
		if _, err := h.a.Undo("default", "nothing-node1"); err == nil {
			t.Fatal("undo of an unknown pod")
		}
	})
}

// A history damaged on disk is reported, and the pod runs and starts a new
// history; it never stops the pod or the agent.
func TestRolloutHistoryDamaged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		root := t.TempDir()
		file := filepath.Join(root, "rollouts", "default_web-node1.json")
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(`{"namespace":"default","name":"web-node1","generations":[{"uid":`), 0o600); err != nil {
			t.Fatal(err)
		}
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		pod := rolloutPod(t, seen, "web", "v1")
		h.send([]manifest.Pod{pod})
		if p := h.pod("web"); p.UID != pod.UID || !podReady(&p) {
			t.Fatalf("pod %s not running Ready", p.UID)
		}
		var reported bool
		for _, e := range h.a.Events().List() {
			reported = reported || (e.Reason == events.FailedValidation && strings.Contains(e.Message, "rollout history "+file+" is damaged"))
		}
		if !reported {
			t.Fatal("the damaged history was not reported")
		}
		hist, err := h.a.Rollout("default", "web-node1")
		if err != nil || len(hist.Generations) != 1 || hist.Generations[0].UID != string(pod.UID) {
			t.Fatalf("history not started afresh: %v %+v", err, hist)
		}
	})
}

// At start, the histories of pods no source has are removed with the
// leftover pod directories; the others stay.
func TestRolloutHistoriesPruned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		dir := filepath.Join(root, "rollouts")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"default_web-node1.json", "default_gone-node1.json"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		h := start(t, newFakeRuntime(), Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		h.send([]manifest.Pod{rolloutPod(t, seen, "web", "v1")})
		names, err := h.a.RolloutNames()
		if err != nil || len(names) != 1 || names[0] != "default/web-node1" {
			t.Fatalf("histories kept: %v %v", names, err)
		}
	})
}

// A generation whose readiness probe keeps failing is rolled back with
// what the probe said; its image IDs are kept all the same.
func TestRollbackSaysWhatTheProbeSaid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 503)
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		good := rolloutPod(t, seen, "web", "v1")
		h.send([]manifest.Pod{good})
		bad := rolloutPod(t, seen, "web", "v2", "    readinessProbe:\n      httpGet: {path: /ready, port: 8080}\n      periodSeconds: 1\n")
		h.send([]manifest.Pod{bad})
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != good.UID {
			t.Fatalf("running %s, want %s", p.UID, good.UID)
		}
		ev := rolledBackEvents(h, good.UID)
		if len(ev) != 1 || !strings.Contains(ev[0], "readiness probe of web: failure HTTP probe failed with statuscode: 503") {
			t.Fatalf("RolledBack events %q", ev)
		}
		hist, _ := h.a.Rollout("default", "web-node1")
		if g := hist.Find(string(bad.UID)); g == nil || g.Images["web"] != "sha256:v2" {
			t.Fatalf("the failed generation's images are not kept: %+v", g)
		}
		if c := rolledBackCondition(h.pod("web")); c == nil || !strings.Contains(c.Message, "statuscode: 503") {
			t.Fatalf("RolledBack condition %+v", c)
		}
		// The file written back as it was: the same generation runs on,
		// no longer in place of another.
		h.send([]manifest.Pod{good})
		time.Sleep(time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != good.UID || rolledBackCondition(p) != nil {
			t.Fatalf("running %s with conditions %+v after the file was written back", p.UID, p.Status.Conditions)
		}
	})
}

// A generation with no earlier Ready one to go back to is left running
// when it fails its deadline, and its file is flagged all the same.
func TestRolloutFailsWithoutTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["broken"] = 2
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		bad := rolloutPod(t, seen, "broken", "v1")
		h.send([]manifest.Pod{bad})
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != bad.UID {
			t.Fatalf("running %s, want %s left running", p.UID, bad.UID)
		}
		if ev := rolledBackEvents(h, bad.UID); len(ev) != 1 || !strings.Contains(ev[0], "no earlier generation that was Ready is kept") {
			t.Fatalf("RolledBack events %q", ev)
		}
		if pr := problemsOf(h); !strings.Contains(pr, "exit code 2") || !strings.Contains(pr, "left running") {
			t.Fatalf("problems %q", pr)
		}
		if st, _ := h.a.Rollout("default", "web-node1"); !st.Status(30 * time.Second).Failed() {
			t.Fatalf("status %+v", st.Status(30*time.Second))
		}
	})
}

// A pod held back by start-after longer than its rollback-after is not
// rolled back for it: its clock starts when it may start.
func TestRolloutClockStartsAfterDependencies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 503)
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		dep := ctr("etcd", "busybox")
		dep.ReadinessProbe = httpProbe("/ready", 10, 1)
		web := rolloutPod(t, seen, "web", "good")
		web.Annotations[manifest.AnnotationStartAfter] = "etcd"
		etcd := testPod("etcd", "ua", v1.RestartPolicyAlways, dep)
		h.send([]manifest.Pod{etcd, web})

		time.Sleep(2 * time.Minute) // four times web's rollback-after
		synctest.Wait()
		if w := h.pod("web").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "WaitingForDependency" {
			t.Fatalf("web is %+v, want waiting for etcd", w)
		}
		rt.SetHealth("/ready", 200)
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); !podReady(&p) {
			t.Fatalf("web not Ready once etcd is: %+v", p.Status.Conditions)
		}
		if ev := rolledBackEvents(h, web.UID); len(ev) != 0 {
			t.Errorf("web's rollout failed for the time it waited for etcd: %q", ev)
		}
		if p := problemsOf(h); p != "" {
			t.Errorf("problems: %s", p)
		}
	})
}

// A generation that staticpodd restart (or a restart-on-change file) made
// keeps its manifest in the history, and is rolled back to as any other:
// after more restarts than the history keeps, a bad edit still has a
// generation to go back to.
func TestRollbackToRestartedGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["broken"] = 3
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		h.send([]manifest.Pod{rolloutPod(t, seen, "web", "good")})
		for range rollout.MaxGenerations {
			if _, err := h.a.RestartPod("default", "web-node1"); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			time.Sleep(time.Second)
		}
		p := h.pod("web")
		if !podReady(&p) {
			t.Fatalf("the restarted generation is not Ready: %+v", p.Status.Conditions)
		}
		goodUID := p.UID
		if hist, _ := h.a.Rollout("default", "web-node1"); hist.Current().UID != string(goodUID) || hist.Current().Manifest == "" {
			t.Fatalf("the restarted generation %s is kept without its manifest: %+v", goodUID, hist.Current())
		}
		h.send([]manifest.Pod{rolloutPod(t, seen, "broken", "good")})
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != goodUID {
			t.Fatalf("running %s after the deadline, want the last Ready generation %s; problems %q", p.UID, goodUID, problemsOf(h))
		}
	})
}

// staticpodd restart of a pod that runs a generation in place of the one
// its file offers (rolled back, or undone) is refused, saying why: the
// restart's new UID would lift the rejection and bring back the
// generation the operator or the deadline refused, while its file is
// unchanged.
func TestRestartRefusedWhileRolledBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})
		v1 := rolloutPod(t, seen, "web", "v1")
		h.send([]manifest.Pod{v1})
		v2 := rolloutPod(t, seen, "web", "v2")
		h.send([]manifest.Pod{v2})
		if _, err := h.a.Undo("default", "web-node1"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		_, err := h.a.RestartPod("default", "web-node1")
		if !errors.Is(err, rollout.ErrRolledBack) || !strings.Contains(err.Error(), "rolled back (undo) to generation "+string(v1.UID)) {
			t.Fatalf("restart of a pod rolled back: %v", err)
		}
		synctest.Wait()
		if p := h.pod("web"); p.UID != v1.UID {
			t.Fatalf("running %s after a refused restart, want %s", p.UID, v1.UID)
		}
		if pr := problemsOf(h); !strings.Contains(pr, "rolled back (undo)") {
			t.Fatalf("problems %q", pr)
		}
		// Once the file changes, the pod restarts again.
		h.send([]manifest.Pod{rolloutPod(t, seen, "web", "v3")})
		if _, err := h.a.RestartPod("default", "web-node1"); err != nil {
			t.Fatalf("restart once the file changed: %v", err)
		}
	})
}

// A daemon down when a generation's rollback-after passed (stopped, killed,
// the node rebooted) finds it not Ready yet as it starts: its readiness
// probe has not run again. The generation is given its probes' first
// results before it is judged, not rolled back at once.
func TestRolloutDeadlinePassedWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 200)
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		cfg := Config{Paths: manifest.Paths{RootDir: root}, Seen: seen}
		h := start(t, rt, cfg)
		probe := "    readinessProbe:\n      httpGet: {path: /ready, port: 8080}\n      initialDelaySeconds: 5\n      periodSeconds: 1\n"
		h.send([]manifest.Pod{rolloutPod(t, seen, "web", "v1", probe)})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		v2 := rolloutPod(t, seen, "web", "v2", probe)
		h.send([]manifest.Pod{v2})
		time.Sleep(10 * time.Second) // Ready, not judged yet
		synctest.Wait()
		if p := h.pod("web"); p.UID != v2.UID || !podReady(&p) {
			t.Fatalf("v2 not running Ready: %s", p.UID)
		}
		h.stop()
		time.Sleep(time.Minute) // its deadline passes while the daemon is down
		h = start(t, rt, cfg)
		h.send([]manifest.Pod{v2})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != v2.UID {
			t.Fatalf("running %s, want v2 %s, Ready again once its probe ran; RolledBack events %q", p.UID, v2.UID, rolledBackEvents(h, p.UID))
		}
	})
}

// The rolled back manifest offered again under another UID (a
// restart-on-change file changed, which Regenerate mixes into the UID)
// stays rolled back: only a change of the file's content lifts it.
func TestRollbackHoldsAcrossASalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["broken"] = 3
		root := t.TempDir()
		seen := NewSeenStore(manifest.Paths{RootDir: root})
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}, Seen: seen})

		good := rolloutPod(t, seen, "web", "good")
		h.send([]manifest.Pod{good})
		bad := rolloutPod(t, seen, "broken", "good")
		h.send([]manifest.Pod{bad})
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != good.UID {
			t.Fatalf("running %s after the deadline, want the last Ready generation %s", p.UID, good.UID)
		}

		salted := manifest.Regenerate(bad, "files:/etc/web.conf=sha256:1\n", nil)
		h.send([]manifest.Pod{salted})
		time.Sleep(time.Second)
		synctest.Wait()
		if p := h.pod("web"); p.UID != good.UID {
			t.Fatalf("running %s once a watched file changed, want the rollback %s kept", p.UID, good.UID)
		}
		if pr := problemsOf(h); !strings.Contains(pr, "rolled back (deadline)") {
			t.Fatalf("the file is no longer flagged: %q", pr)
		}

		fixed := rolloutPod(t, seen, "web", "fixed")
		h.send([]manifest.Pod{fixed})
		if p := h.pod("web"); p.UID != fixed.UID {
			t.Fatalf("running %s, want the new edit %s", p.UID, fixed.UID)
		}
	})
}

// The RolledBack condition's reason comes from what the pod wrote (probe
// output): it reaches the API server, and kubectl describe's terminal, as
// one line with no control characters (escape sequences, C1 controls).
func TestRolledBackConditionNoControl(t *testing.T) {
	r := newRollouts("")
	h := r.historyLocked("default", "web")
	t0 := time.Unix(1000, 0)
	h.Generations = []rollout.Generation{
		{UID: "good", StartedAt: t0, ReadyAt: t0, Manifest: "x"},
		{UID: "bad", StartedAt: t0.Add(time.Minute)},
	}
	h.Fail("bad", t0.Add(2*time.Minute), "readiness probe of web: failure \x1b[2J\x1b]0;pwned\x07\r\nline two\u009b31m\x7f", nil, rollout.ByDeadline, &h.Generations[0])
	c := r.condition("default/web", &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "good"}})
	if c == nil {
		t.Fatal("no RolledBack condition")
	}
	if i := strings.IndexFunc(c.Message, unicode.IsControl); i >= 0 {
		t.Fatalf("control character %q in the condition's message %q", c.Message[i:i+1], c.Message)
	}
	if !strings.Contains(c.Message, "line two") {
		t.Fatalf("message %q lost the reason", c.Message)
	}
}
