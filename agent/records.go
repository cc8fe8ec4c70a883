package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/lifecycle"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/rollout"
	"github.com/staticpodd/staticpodd/agent/status"
)

// Records answers the command line's questions (server.Agent) from what a
// daemon that is not running left on disk, as crictl keeps working with the
// kubelet down: its pods (RecordedPods), their containers' log files, the
// containers' creations and starts as events, and exec through exec, which
// runs the command without a daemon (oci.ExecRecorded). Probe results,
// manifest problems and the events the daemon kept in memory died with it.
type Records struct {
	podSet
	events   *events.Recorder
	exec     func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error)
	rollouts *rollout.Store
}

// NewRecords puts the records together as RecordedPods does.
func NewRecords(rootDir string, containers []podspec.ContainerStatus, sandboxes map[string]podspec.SandboxStatus,
	exec func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error), now time.Time) *Records {
	pods := RecordedPods(rootDir, containers, sandboxes, now)
	// A pod's log directory is where its containers' records say their
	// logs are: the daemon's podLogsDir is in its configuration, which the
	// command line need not have.
	logDirs := map[string]string{}
	for _, c := range containers {
		if filepath.IsAbs(c.LogPath) {
			logDirs[c.PodUID] = filepath.Dir(filepath.Dir(c.LogPath))
		}
	}
	r := &Records{
		podSet: podSet{pods: pods, logDir: func(p *v1.Pod) string { return logDirs[string(p.UID)] },
			containers: func(context.Context) ([]podspec.ContainerStatus, error) { return containers, nil }},
		events:   events.New("", 0, nil),
		exec:     exec,
		rollouts: rollout.NewStore(rootDir),
	}
	byPod := map[string]*v1.Pod{}
	for i := range pods {
		byPod[string(pods[i].UID)] = &pods[i]
	}
	var evs []v1.Event
	for _, c := range containers {
		pod := byPod[c.PodUID]
		if pod == nil {
			continue
		}
		ref := events.ContainerRef(pod, c.Name)
		for _, e := range []struct {
			at             time.Time
			reason, format string
		}{{c.CreatedAt, events.Created, "Container created"}, {c.StartedAt, events.Started, "Container started"}} {
			if e.at.IsZero() {
				continue
			}
			ev := events.Make("", ref, v1.EventTypeNormal, e.reason, e.format)
			ev.Name = fmt.Sprintf("%s.%x", pod.Name, e.at.UnixNano())
			ev.FirstTimestamp, ev.LastTimestamp = metav1.NewTime(e.at), metav1.NewTime(e.at)
			evs = append(evs, *ev)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].LastTimestamp.Before(&evs[j].LastTimestamp) })
	for _, ev := range evs {
		r.events.Keep(ev)
	}
	return r
}

// Pods are the pods as their records say.
func (r *Records) Pods() []v1.Pod { return slices.Clone(r.pods) }

// Problems: the manifests' problems were the daemon's, in memory.
func (r *Records) Problems() []manifest.Problem { return nil }

// Probes: probe results were the daemon's, in memory.
func (r *Records) Probes() []prober.Status { return nil }

// Events are the containers' creations and starts, at their recorded times.
func (r *Records) Events() *events.Recorder { return r.events }

func (r *Records) LogFile(ctx context.Context, namespace, pod, container string, previous bool) (string, error) {
	return r.logFile(ctx, namespace, pod, container, previous)
}

func (r *Records) LogEnded(namespace, pod, container, path string) bool {
	return r.logEnded(namespace, pod, container, path)
}

func (r *Records) ExecTarget(namespace, pod, container string) (string, error) {
	return r.execTarget(namespace, pod, container)
}

func (r *Records) Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
	return r.exec(ctx, id, spec)
}

// Rollout is the pod's rollout history as the daemon left it.
func (r *Records) Rollout(namespace, name string) (rollout.History, error) {
	h, err := r.rollouts.Load(namespace, name)
	return *h, err
}

// RolloutNames are the pods that have a rollout history on disk.
func (r *Records) RolloutNames() ([]string, error) { return r.rollouts.Names() }

// RollbackAfter is the recorded pod's staticpodd.io/rollback-after.
func (r *Records) RollbackAfter(namespace, name string) time.Duration {
	for i := range r.pods {
		if p := &r.pods[i]; p.Namespace == namespace && p.Name == name {
			return manifest.RollbackAfter(p)
		}
	}
	return 0
}

// Debug refuses: a debug container lives as long as its request, and
// without a daemon none would remove it after a client that died.
func (r *Records) Debug(namespace, pod string, _ podspec.DebugRequest) (func(context.Context, podspec.ExecSpec) (int, error), error) {
	return nil, fmt.Errorf("debug pod %s/%s: the daemon is not running; debug containers run only under it", namespace, pod)
}

// Changed never fires: nothing updates the records while no daemon runs.
func (r *Records) Changed() <-chan struct{} { return nil }

// RecordedPods are the pods as the records of a daemon that is not running
// say they are, for the command line (`ps`, `logs`, `exec` with the daemon
// down): the runtime's containers and sandboxes (oci.Recorded,
// oci.RecordedSandboxes), and under rootDir each pod's manifest.json, start
// time and probe marks, put together by status.Generate as a worker would.
// What only a daemon knows is missing: why a container waits, its
// back-off, the node's address, and pods whose manifests changed since.
// A pod without a kept manifest gets the containers its records name.
func RecordedPods(rootDir string, containers []podspec.ContainerStatus, sandboxes map[string]podspec.SandboxStatus, now time.Time) []v1.Pod {
	byUID := map[string][]podspec.ContainerStatus{}
	for _, c := range containers {
		byUID[c.PodUID] = append(byUID[c.PodUID], c)
	}
	for uid := range sandboxes {
		if _, ok := byUID[uid]; !ok {
			byUID[uid] = nil
		}
	}
	seen := NewSeenStore(manifest.Paths{RootDir: rootDir})
	marks := prober.FileMarks{File: poddir.Root(rootDir).ProbeMark}
	hooks := lifecycle.FileMarks{File: poddir.Root(rootDir).PostStartMark}
	var out []v1.Pod
	for uid, cs := range byUID {
		if !manifest.ValidUID(uid) {
			continue // not a pod a daemon made; never a path out of rootDir
		}
		pod := recordedPod(rootDir, uid, cs)
		if pod == nil {
			continue
		}
		sb, hasSandbox := sandboxes[uid]
		gen := &status.Generation{UID: uid, Policy: pod.Spec.RestartPolicy, StartTime: seen.Started(uid, time.Time{}),
			Containers: map[string]status.Remembered{}}
		// What the daemon kept for its successor: the instances its
		// containers' restarts replaced, and its conditions' transitions.
		last, _ := keptLast(rootDir, uid, cs)
		for name, c := range last {
			gen.Containers[name] = status.Remembered{Last: &c}
		}
		var prev *v1.PodStatus
		if conds, _ := keptConditions(rootDir, uid); conds != nil {
			prev = &v1.PodStatus{Conditions: conds}
		}
		in := status.Input{
			Pod: pod, Containers: cs, Sandbox: hasSandbox,
			Gen:  gen,
			Prev: prev,
			Probe: func(c *v1.Container, id string) (started, ready bool) {
				// One whose postStart hook the daemon did not see done:
				// the next daemon runs it again, not started meanwhile.
				if i := slices.IndexFunc(cs, func(k podspec.ContainerStatus) bool { return k.ID == id }); i >= 0 &&
					!strings.ContainsAny(c.Name, "/.") && hooks.Marked(uid, c.Name, cs[i].Attempt) {
					return false, false
				}
				started = c.StartupProbe == nil || marks.Marked(uid, id, prober.MarkStarted)
				ready = c.ReadinessProbe == nil || marks.Marked(uid, id, prober.MarkReady)
				return started, started && ready
			},
			Now: now,
		}
		if hasSandbox {
			in.Network = &sb
		}
		pod.Status = status.Generate(in)
		unknown(&pod.Status, cs)
		out = append(out, *pod)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// recordedPod is pod uid as its kept manifest (manifest.json) names it,
// under the name its containers were started with; else, with no usable
// manifest, the pod its containers' records describe; nil if neither says
// what the pod is.
func recordedPod(rootDir, uid string, cs []podspec.ContainerStatus) *v1.Pod {
	var name, namespace string
	for _, c := range cs {
		name, namespace = c.PodName, c.PodNamespace
	}
	if pod := keptPod(rootDir, uid, name); pod != nil {
		return pod
	}
	if name == "" {
		return nil
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(uid)}}
	for _, c := range cs {
		if !slices.ContainsFunc(pod.Spec.Containers, func(have v1.Container) bool { return have.Name == c.Name }) {
			pod.Spec.Containers = append(pod.Spec.Containers, manifest.RestoreContainer(c.Name, c.Annotations))
		}
	}
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	return pod
}

// keptPod is the pod of uid's manifest.json, named fullName when its
// containers say so (the node's name is in it), else for this host's name.
func keptPod(rootDir, uid, fullName string) *v1.Pod {
	b, err := os.ReadFile(poddir.Root(rootDir).Manifest(uid))
	if err != nil {
		return nil
	}
	var m stored
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	node, _ := os.Hostname()
	suffix := "-" + strings.ToLower(node)
	parsed := manifest.Check(m.Manifest, m.Source, m.Origin, node)
	for _, p := range parsed.Pods {
		// The manifest's own name is what precedes -<node> in the name
		// Check gave it for this host; the containers' name holds the
		// daemon's node name after the same prefix. A URL's list holds
		// several pods: the one with that name, or uid, is this one.
		base := strings.TrimSuffix(p.Name, suffix)
		if n, ok := strings.CutPrefix(fullName, base+"-"); ok && fullName != "" {
			p.Name, p.Spec.NodeName = fullName, n
		} else if string(p.UID) != uid && (fullName != "" || len(parsed.Pods) > 1) {
			continue
		}
		// The UID and config.hash are the daemon's, whose node name made
		// them; config.seen is the recorded one, as the daemon stamps it.
		p.UID = types.UID(uid)
		p.Annotations[manifest.AnnotationHash] = uid
		manifest.Stamp(p, NewSeenStore(manifest.Paths{RootDir: rootDir}).Seen)
		return p.Pod
	}
	return nil
}

// unknown shows a container whose monitor is gone with no exit recorded
// (oci.Recorded's StateUnknown), which Generate takes for one being made, as
// waiting with the kubelet's ContainerStatusUnknown and why: the next daemon
// records its exit.
func unknown(st *v1.PodStatus, cs []podspec.ContainerStatus) {
	latest := status.LatestByName(cs)
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			if l, ok := latest[list[i].Name]; ok && l.State == podspec.StateUnknown && list[i].State.Waiting != nil {
				list[i].State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerStatusUnknown", Message: l.Message}
			}
		}
	}
}
