package agent

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

const testNode = "node1"

// recNotifier records what the agent tells systemd.
type recNotifier struct {
	mu        sync.Mutex
	ready     int
	statuses  []string
	watchdogs int
}

func (n *recNotifier) Ready() { n.mu.Lock(); n.ready++; n.mu.Unlock() }
func (n *recNotifier) Status(s string) {
	n.mu.Lock()
	n.statuses = append(n.statuses, s)
	n.mu.Unlock()
}
func (n *recNotifier) Watchdog() { n.mu.Lock(); n.watchdogs++; n.mu.Unlock() }

func (n *recNotifier) snapshot() (ready int, statuses []string, watchdogs int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready, append([]string(nil), n.statuses...), n.watchdogs
}

type harness struct {
	t       *testing.T
	rt      *fakeRuntime
	a       *Agent
	n       *recNotifier
	updates chan source.Update
	cancel  context.CancelFunc
	done    chan error
	logs    *syncBuffer // what the agent logged
}

// syncBuffer is an io.Writer the agent's goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs an agent on a fake runtime inside the current synctest bubble.
func start(t *testing.T, rt *fakeRuntime, cfg Config) *harness {
	t.Helper()
	n := &recNotifier{}
	cfg.NodeName = testNode
	cfg.Notifier = n
	if cfg.Sources == nil {
		cfg.Sources = []string{manifest.SourceFile}
	}
	logs := &syncBuffer{}
	a := New(cfg, rt, slog.New(slog.NewTextHandler(logs, nil)))
	a.conv = &fakeConv{rt: rt}
	a.marks = rt.marks
	ctx, cancel := context.WithCancel(t.Context())
	h := &harness{t: t, rt: rt, a: a, n: n, logs: logs, updates: make(chan source.Update), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- a.Run(ctx, h.updates) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	if err := <-h.done; err != nil {
		h.t.Errorf("Run returned %v, want nil on cancellation", err)
	}
}

// send delivers one file-source update and waits until the agent has acted on it.
func (h *harness) send(pods []manifest.Pod, problems ...manifest.Problem) {
	h.updates <- source.Update{Source: manifest.SourceFile, Pods: pods, Problems: problems}
	synctest.Wait()
}

// pod returns the live status of the pod named name-node1, failing when absent.
func (h *harness) pod(name string) v1.Pod {
	h.t.Helper()
	for _, p := range h.a.Pods() {
		if p.Name == name+"-"+testNode {
			return p
		}
	}
	h.t.Fatalf("pod %s not in Pods()", name)
	return v1.Pod{}
}

func testPod(name, uid string, policy v1.RestartPolicy, containers ...v1.Container) manifest.Pod {
	grace := int64(5)
	return manifest.Pod{
		Pod: &v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + testNode, Namespace: "default", UID: types.UID(uid)},
			Spec: v1.PodSpec{
				Containers:                    containers,
				RestartPolicy:                 policy,
				TerminationGracePeriodSeconds: &grace,
			},
		},
		Source: manifest.SourceFile,
		Origin: "/etc/kubernetes/manifests/" + name + ".yaml",
	}
}

func ctr(name, image string, cmd ...string) v1.Container {
	return v1.Container{Name: name, Image: image, Command: cmd}
}

func sourceUpdate(src string, pods ...manifest.Pod) source.Update {
	return source.Update{Source: src, Pods: pods}
}
