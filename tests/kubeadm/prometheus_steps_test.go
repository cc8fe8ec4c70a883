//go:build kubeadm

package kubeadm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// promAnswer is what Prometheus's query API answers.
type promAnswer struct {
	Status string
	Data   struct {
		Result []struct {
			Metric map[string]string
			Value  []any
		}
	}
}

// prometheusSteps follows docs/guides/prometheus.md on m, a kubeadm node
// whose node agent is staticpodd: RBAC and a token for Prometheus, the
// read-only port, Debian's prometheus scraping the node API and the
// read-only port. It asks Prometheus that every target is up and that
// kube-apiserver's container series came with the kubelet's labels.
func prometheusSteps(t *testing.T, m *Machine) {
	t.Helper()
	for name, body := range promFiles {
		writeFile(t, m.Host("/root/"+name), body)
	}
	for _, line := range []string{promApply, promToken, promReadOnlyPort} {
		t.Logf("%s$ %s\n%s", m.Name, line, m.Sh(time.Minute, line))
	}
	before := m.AgentPID()
	m.Sh(2*time.Minute, promRestart)
	if m.AgentPID() == before {
		t.Fatalf("%s: systemctl restart kubelet left the node agent %d running", m.Name, before)
	}
	waitOn(t, m, time.Minute, "curl -s http://127.0.0.1:10255/healthz", "ok")

	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	prom := m.Command(ctx, "sh", "-c", "exec "+promRun)
	prom.Stdout, prom.Stderr = &out, &out
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		prom.Wait()
	}()

	query := func(line string) promAnswer {
		t.Helper()
		var a promAnswer
		got, err := m.ShErr(30*time.Second, line)
		if err == nil {
			err = json.Unmarshal([]byte(got), &a)
		}
		if err != nil || a.Status != "success" {
			return promAnswer{}
		}
		return a
	}
	jobs := []string{"node-api", "node-api-cadvisor", "node-api-probes", "read-only-port"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var up []string
		for _, r := range query(promQueryUp).Data.Result {
			if len(r.Value) == 2 && r.Value[1] == "1" {
				up = append(up, r.Metric["job"])
			}
		}
		sort.Strings(up)
		if slices.Equal(up, jobs) {
			t.Logf("prometheus: every target up: %s", strings.Join(up, ", "))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: targets up after 2 minutes: %v, want %v\n%s$ %s\n%s\nits targets, with their last errors:\n%s\nprometheus:\n%s",
				up, jobs, m.Name, promQueryUp, m.Sh(time.Minute, promQueryUp),
				m.Sh(time.Minute, "curl -s http://127.0.0.1:9090/api/v1/targets"), out.String())
		}
		time.Sleep(time.Second)
	}
	var series []string
	for _, r := range query(promQuerySeries).Data.Result {
		series = append(series, fmt.Sprint(r.Metric))
		if r.Metric["namespace"] != "kube-system" || r.Metric["pod"] != "kube-apiserver-"+m.Name {
			t.Errorf("a series of kube-apiserver's pod with labels %v", r.Metric)
		}
	}
	jobsSeen := map[string]bool{}
	for _, r := range query(promQuerySeries).Data.Result {
		if r.Metric["container"] == "kube-apiserver" && r.Metric["image"] != "" {
			jobsSeen[r.Metric["job"]] = true
		}
	}
	if !jobsSeen["node-api-cadvisor"] || !jobsSeen["read-only-port"] {
		t.Errorf("kube-apiserver's container_memory_working_set_bytes with its container and image labels, by job: %v; want node-api-cadvisor and read-only-port\n%s",
			jobsSeen, strings.Join(series, "\n"))
	}
}
