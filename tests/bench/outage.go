package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/agent/status"
)

// outagePods are four static pods whose status changes every second, and
// an event every second, while the API server refuses every connection.
type outagePods struct {
	rec *events.Recorder
	ch  chan struct{}

	mu   sync.Mutex
	pods map[string]*v1.Pod // by full name
	next []string
}

func (o *outagePods) Watch() mirror.Watch      { return o }
func (o *outagePods) Events() *events.Recorder { return o.rec }
func (o *outagePods) C() <-chan struct{}       { return o.ch }
func (o *outagePods) Close()                   {}
func (o *outagePods) Synced() bool             { return true }
func (o *outagePods) Desired(name string) status.Shared {
	o.mu.Lock()
	defer o.mu.Unlock()
	return status.Share(o.pods[name]) // change makes new pods
}
func (o *outagePods) Stopping(string) []status.Shared { return nil } // none is ever replaced
func (o *outagePods) Keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Collect(maps.Keys(o.pods))
}
func (o *outagePods) Next() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.next
	o.next = nil
	return out
}

func (o *outagePods) change(i int) {
	o.mu.Lock()
	for n := range 4 {
		name := fmt.Sprintf("pod%d-node1", n)
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID(fmt.Sprintf("uid%d", n)),
				Annotations: map[string]string{manifest.AnnotationHash: fmt.Sprintf("uid%d", n)}},
			Spec:   v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Message: fmt.Sprint(i)},
		}
		o.pods["kube-system/"+name] = p
		o.next = append(o.next, "kube-system/"+name)
		o.rec.Eventf(events.PodRef(p), v1.EventTypeNormal, events.Started, "tick %d", i)
	}
	o.mu.Unlock()
	select {
	case o.ch <- struct{}{}:
	default:
	}
}

// refusingKubeconfig writes a kubeconfig in dir whose server refuses every
// connection.
func refusingKubeconfig(dir string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	l.Close() // refused from now on
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://%s", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: bench}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, addr)
	return kubeconfig, os.WriteFile(kubeconfig, []byte(cfg), 0o600)
}

// flipper is a pod whose readiness flips every 5 seconds: a status change and
// an Unhealthy event every few seconds.
const flipper = `apiVersion: v1
kind: Pod
metadata: {name: flipper}
spec:
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      exec: {command: ["sh", "-c", "test $(( $(date +%s) / 5 % 2 )) = 0"]}
      periodSeconds: 1
      failureThreshold: 1
`

// benchOutageDaemon runs the staticpodd binary with a kubeconfig whose API
// server refuses every connection and a pod whose readiness flips, for
// window, and prints the daemon's RSS and threads every tenth of it.
func benchOutageDaemon(bin, image string, window time.Duration) error {
	if image == "" {
		return fmt.Errorf("need -image with -staticpodd (make bench sets both)")
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-outaged-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig, err := refusingKubeconfig(dir)
	if err != nil {
		return err
	}
	d, err := startDaemon(bin, image, dir, "--kubeconfig", kubeconfig)
	if err != nil {
		return err
	}
	defer d.stop()
	defer d.removePods()
	if err := os.WriteFile(filepath.Join(d.manifests, "flipper.yaml"), []byte(flipper), 0o644); err != nil {
		return err
	}
	if err := poll(30*time.Second, func() bool { n, _ := d.countPods(); return n == 1 }); err != nil {
		return fmt.Errorf("flipper not listed: %v", err)
	}
	pid := d.cmd.Process.Pid
	fmt.Printf("\nthe staticpodd daemon, API server refusing connections for %v, one pod whose readiness flips every 5 s:\n\n", window)
	fmt.Printf("| after | daemon RSS | of which anon | threads |\n|---|---|---|---|\n")
	start := time.Now()
	var first, last procMem
	var firstThreads, lastThreads int
	for i := 0; i <= 10; i++ {
		if i > 0 {
			time.Sleep(window / 10)
		}
		m, th := memOf(pid), threadsOf(pid)
		if i == 0 {
			first, firstThreads = m, th
		}
		last, lastThreads = m, th
		fmt.Printf("| %v | %s | %s | %d |\n", time.Since(start).Round(time.Second), mib(m.rss), mib(m.anon), th)
	}
	fmt.Printf("\nRSS %s → %s, threads %d → %d\n", mib(first.rss), mib(last.rss), firstThreads, lastThreads)
	return nil
}

func threadsOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// benchOutage runs the mirror client against an API server address that
// refuses every connection for window, with pod changes and events coming
// every second, and prints its goroutines, heap and the process's RSS at
// the start and the end: none may grow over a long outage.
func benchOutage(window time.Duration) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-outage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig, err := refusingKubeconfig(dir)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	pods := &outagePods{rec: events.New("node1", 0, logger), ch: make(chan struct{}, 1), pods: map[string]*v1.Pod{}}
	m := mirror.New(mirror.Config{Credentials: mirror.NewCredentials(mirror.CredentialsConfig{Kubeconfig: kubeconfig, Version: "bench"}, logger), NodeName: "node1", RegisterNode: true, Version: "bench"}, pods, logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()

	type sample struct {
		at         time.Duration
		goroutines int
		heap       uint64
		rss        int64
	}
	take := func(at time.Duration) sample {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return sample{at: at, goroutines: runtime.NumGoroutine(), heap: ms.HeapInuse, rss: memOf(os.Getpid()).rss}
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var samples []sample
	warm := min(30*time.Second, window/10)
	nextSample := warm
	for i := 0; time.Since(start) < window; i++ {
		<-tick.C
		pods.change(i)
		if el := time.Since(start); el >= nextSample {
			samples = append(samples, take(el.Round(time.Second)))
			nextSample += window / 10
		}
	}
	samples = append(samples, take(time.Since(start).Round(time.Second)))
	_, err = m.Status()
	cancel()
	<-done

	fmt.Printf("\nmirror client, API server refusing connections for %v (4 pods changing and 4 events every second):\n\n", window)
	fmt.Printf("| after | goroutines | Go heap in use | process RSS |\n|---|---|---|---|\n")
	for _, s := range samples {
		fmt.Printf("| %v | %d | %s | %s |\n", s.at, s.goroutines, mib(int64(s.heap)), mib(s.rss))
	}
	fmt.Printf("\nhealth at the end: %v\n", err)
	first, last := samples[0], samples[len(samples)-1]
	if last.goroutines > first.goroutines+5 {
		return fmt.Errorf("goroutines grew from %d to %d over the outage", first.goroutines, last.goroutines)
	}
	return nil
}
