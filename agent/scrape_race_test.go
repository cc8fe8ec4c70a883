package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/server"
)

// Scrapes of every metrics endpoint run while the agent's workers publish
// (a resync that republishes the same pod, a restart, a new generation
// beside the older one stopping, a pod removed) and while a debug
// container comes and goes: a scrape reads the status manager's pods with
// its lock released, so any change of a pod in place after it is
// published is a data race (go test -race). At rest after each change,
// /metrics shows what Pods shows: the pods, and each container's restarts.
func TestScrapeWhilePodsChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		// The sidecar stops at its grace period's end: the older
		// generation is listed stopping meanwhile, its other containers
		// shown exited as they exit.
		rt.stubborn["proxy"] = true
		rt.debugFunc = func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, nil
		}
		h := start(t, rt, Config{SyncFrequency: time.Second})
		metrics := server.ReadOnly(h.a, server.NewMetrics(h.a), slog.New(slog.DiscardHandler))
		get := func(path string) string {
			rec := httptest.NewRecorder()
			metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("GET %s = %d: %s", path, rec.Code, rec.Body)
			}
			return rec.Body.String()
		}
		// The scraper scrapes every endpoint a few times, and reads Pods,
		// each time it is kicked, beside what the test does next.
		kick, scraped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(scraped)
			for range kick {
				for range 3 {
					for _, path := range scrapePaths {
						get(path)
					}
					h.a.Pods()
				}
			}
		}()
		defer func() { close(kick); <-scraped }()

		web := func(uid string) manifest.Pod {
			side := ctr("proxy", "envoy")
			always := v1.ContainerRestartPolicyAlways
			side.RestartPolicy = &always
			p := testPod("web", uid, v1.RestartPolicyAlways, ctr("main", "busybox"), ctr("log", "busybox"))
			p.Spec.InitContainers = []v1.Container{ctr("init", "busybox"), side}
			return p
		}
		db := testPod("db", "d1", v1.RestartPolicyAlways, ctr("db", "etcd"))
		// atRest checks /metrics against Pods, once nothing moves.
		atRest := func(step string) {
			t.Helper()
			synctest.Wait()
			pods := h.a.Pods()
			text := get("/metrics")
			if want := fmt.Sprintf("kubelet_desired_pods{static=\"true\"} %d\n", len(pods)); !strings.Contains(text, want) {
				t.Errorf("%s: /metrics lacks %q", step, want)
			}
			for _, p := range pods {
				for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
					want := fmt.Sprintf("staticpodd_container_restarts{container=%q,namespace=%q,pod=%q,uid=%q} %d\n", cs.Name, p.Namespace, p.Name, p.UID, cs.RestartCount)
					if !strings.Contains(text, want) {
						t.Errorf("%s: /metrics lacks %q", step, want)
					}
				}
			}
		}
		step := func(name string, f func()) {
			kick <- struct{}{}
			f()
			atRest(name)
		}

		// exit ends web's running container name with code.
		exit := func(name string, code int) {
			p := h.pod("web")
			for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if cs.Name == name && cs.State.Running != nil {
					rt.Exit(strings.TrimPrefix(cs.ContainerID, containerIDPrefix), code)
				}
			}
		}
		step("start", func() { h.send([]manifest.Pod{web("u1"), db}) })
		step("init done", func() {
			exit("init", 0)
			time.Sleep(time.Second)
		})
		step("resync", func() { time.Sleep(3 * time.Second) })
		for range 2 {
			step("restart", func() {
				exit("main", 1)
				time.Sleep(30 * time.Second)
			})
		}
		if cs := h.pod("web").Status.ContainerStatuses; len(cs) != 2 || cs[1].Name != "main" || cs[1].RestartCount == 0 {
			t.Errorf("web's containers after restarts: %+v", cs)
		}
		var end context.CancelFunc
		step("debug", func() {
			run, err := h.a.Debug("default", "web-"+testNode, podspec.DebugRequest{Image: "tools:1", Target: "main", Cmd: []string{"sh"}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			end = cancel
			go run(ctx, podspec.ExecSpec{})
		})
		if es := h.pod("web").Status.EphemeralContainerStatuses; len(es) != 1 {
			t.Errorf("ephemeral containers %+v, want the debug container", es)
		}
		step("resync with a debug container", func() { time.Sleep(3 * time.Second) })
		step("debug ends", func() { end() })
		step("new generation", func() {
			h.send([]manifest.Pod{web("u2"), db})
			time.Sleep(time.Second)
		})
		if pods := h.a.Pods(); len(pods) != 3 || pods[1].UID != "u1" || pods[1].DeletionTimestamp == nil || pods[2].UID != "u2" {
			t.Errorf("after a new generation: %d pods, want db, web u1 stopping, web u2", len(pods))
		}
		step("older generation gone", func() { time.Sleep(30 * time.Second) })
		step("new generation's init done", func() {
			exit("init", 0)
			time.Sleep(time.Second)
		})
		if p := h.pod("web"); p.UID != "u2" || p.Status.Phase != v1.PodRunning {
			t.Errorf("web after its new generation started: %s %s", p.UID, p.Status.Phase)
		}
		step("resync of the new generation", func() { time.Sleep(3 * time.Second) })
		step("removed", func() {
			h.send([]manifest.Pod{db})
			time.Sleep(30 * time.Second)
		})
		if pods := h.a.Pods(); len(pods) != 1 || pods[0].Name != "db-"+testNode {
			t.Errorf("left: %d pods, want db alone", len(pods))
		}
	})
}
