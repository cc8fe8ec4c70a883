package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/staticpodd/staticpodd/agent/histogram"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
)

// EvictionCounter is implemented by an Agent that counts its evictions by
// signal.
type EvictionCounter interface {
	Evictions() map[string]uint64
}

// Timer is implemented by an Agent that times pod starts and pod worker
// syncs.
type Timer interface {
	PodStartDurations() histogram.Snapshot
	PodWorkerDurations() map[string]histogram.Snapshot
}

// URLRequestCounter is implemented by an Agent whose pods may come from a
// manifest URL: the requests made to it so far, and how many failed; ok is
// false while there is no URL.
type URLRequestCounter interface {
	URLRequests() (total, failed uint64, ok bool)
}

// ProbeCounter is implemented by an Agent that counts the probes it makes.
type ProbeCounter interface {
	ProbeCounts() map[prober.CountKey]uint64
}

// MetricsAgent is an Agent whose metrics are served: a scrape reads its
// pods through PodFigures, never Pods, which copies every pod with its
// status.
type MetricsAgent interface {
	Agent
	// PodFigures calls f with what the metrics read of each pod, in the
	// order of Pods, without a copy of any pod: fig is f's only while it
	// runs (agent.Agent.PodFigures).
	PodFigures(f func(fig *status.Figures))
}

// Metrics are the Prometheus registries of the node API: /metrics,
// /metrics/cadvisor, /metrics/probes and /metrics/resource. Every figure is read from the agent
// when scraped; nothing is copied between scrapes but the request counter.
type Metrics struct {
	main, cadvisor, probes, resource *prometheus.Registry
	requests                         *prometheus.CounterVec
	duration                         *prometheus.HistogramVec
}

// CountHandshakesRefused shows c, a TLS listener's Limits.HandshakesRefused,
// on /metrics as staticpodd_node_api_tls_handshakes_refused_total; nil c
// shows nothing. It returns m.
func (m *Metrics) CountHandshakesRefused(c *atomic.Uint64) *Metrics {
	if c != nil {
		m.main.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "staticpodd_node_api_tls_handshakes_refused_total",
			Help: "Connections closed before their TLS handshake because their client address had as many connections in their handshake or not yet authorized as allowed",
		}, func() float64 { return float64(c.Load()) }))
	}
	return m
}

// scrapeTimeout bounds the stats a /metrics/cadvisor scrape reads.
const scrapeTimeout = 10 * time.Second

// NewMetrics returns the registries for a. The kubelet's metric names are
// used where the meaning is the same (pkg/kubelet/metrics, the server's
// metrics, cAdvisor's container_* and the prober's prober_probe_total);
// staticpodd_* are its own.
func NewMetrics(a MetricsAgent) *Metrics {
	m := &Metrics{main: prometheus.NewRegistry(), cadvisor: prometheus.NewRegistry(), probes: prometheus.NewRegistry(), resource: prometheus.NewRegistry()}
	// pkg/kubelet/server/metrics: server_type is readonly or readwrite.
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_http_requests_total", Help: "Number of the http requests received since the server started",
	}, []string{"method", "path", "server_type", "long_running"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kubelet_http_requests_duration_seconds", Help: "Duration in seconds to serve http requests",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "path", "server_type", "long_running"})
	m.main.MustRegister(m.requests, m.duration, agentCollector{a},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.cadvisor.MustRegister(cadvisorCollector{a})
	m.probes.MustRegister(probeCollector{a})
	m.resource.MustRegister(resourceCollector{a})
	return m
}

func (m *Metrics) handler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// instrument counts the requests of h, by the first segment of their path,
// as the kubelet's server does.
func (m *Metrics) instrument(h http.Handler, serverType string) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		path := rootPath(r.URL.Path)
		longRunning := "false"
		if path == "containerLogs" && r.URL.Query().Get("follow") == "true" {
			longRunning = "true"
		}
		h.ServeHTTP(w, r)
		method := methodBucket(r.Method)
		m.requests.WithLabelValues(method, path, serverType, longRunning).Inc()
		m.duration.WithLabelValues(method, path, serverType, longRunning).Observe(time.Since(start).Seconds())
	})
}

// rootPath is the kubelet's getURLRootPath: the first segment of a path,
// from a fixed set so that a client cannot make series without end.
func rootPath(path string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	switch seg {
	case "healthz", "pods", "stats", "metrics", "containerLogs", "logs", "configz", "exec", "attach", "portForward", "runningpods":
		return seg
	}
	return "other"
}

// methodBucket is the kubelet's getMetricMethodBucket: a method it knows,
// or "other", so that a client cannot make series without end.
func methodBucket(m string) string {
	switch m {
	case http.MethodOptions, http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodTrace, http.MethodConnect:
		return m
	}
	return "other"
}

var (
	descRunningPods = prometheus.NewDesc("kubelet_running_pods", "Number of pods that have a running pod sandbox", nil, nil)
	descContainers  = prometheus.NewDesc("kubelet_running_containers", "Number of containers currently running", []string{"container_state"}, nil)
	descDesired     = prometheus.NewDesc("kubelet_desired_pods", "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.", []string{"static"}, nil)
	descNodeName    = prometheus.NewDesc("kubelet_node_name", "The node's name. The count is always 1.", []string{"node"}, nil)
	descProblems    = prometheus.NewDesc("staticpodd_manifest_problems", "Number of manifests that are not run as written, each for its reason (staticpodd ps shows them)", nil, nil)
	descRestarts    = prometheus.NewDesc("staticpodd_container_restarts", "Restart count of a container of a static pod, as its status says", []string{"namespace", "pod", "uid", "container"}, nil)
	descPodStart    = prometheus.NewDesc("kubelet_pod_start_duration_seconds", "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run", nil, nil)
	descPodWorker   = prometheus.NewDesc("kubelet_pod_worker_duration_seconds", "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", []string{"operation_type"}, nil)
	descEvictions   = prometheus.NewDesc("kubelet_evictions", "Cumulative number of pod evictions by eviction signal", []string{"eviction_signal"}, nil)
	descReady       = prometheus.NewDesc("staticpodd_pod_ready", "1 when the pod's Ready condition is True", []string{"namespace", "pod", "uid"}, nil)
	descURLRequests = prometheus.NewDesc("staticpodd_manifest_url_requests_total", "Requests made to the manifest URL (staticPodURL), by result: success (a body read) or failure", []string{"result"}, nil)
)

// agentCollector reads /metrics' pod figures from the agent's status.
type agentCollector struct{ a MetricsAgent }

func (agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunningPods, descContainers, descDesired, descNodeName, descProblems, descRestarts, descReady, descEvictions, descPodStart, descPodWorker, descURLRequests} {
		ch <- d
	}
}

// containerStates are kubelet_running_containers' container_state, by
// status.StateKind; unknown is never counted, as the kubelet's.
var containerStates = [...]string{status.StateNone: "unknown", status.StateRunning: "running", status.StateExited: "exited", status.StateCreated: "created"}

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	pods, running := 0, 0
	var states [len(containerStates)]int
	c.a.PodFigures(func(p *status.Figures) {
		pods++
		podRunning := false
		for _, list := range [2][]status.ContainerFigures{p.InitStatuses, p.Statuses} {
			for i := range list {
				cs := &list[i]
				switch cs.State {
				case status.StateRunning:
					podRunning = true
					states[cs.State]++
				case status.StateExited, status.StateCreated:
					states[cs.State]++
				}
				ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.GaugeValue, float64(cs.RestartCount), p.Namespace, p.Name, p.UID, cs.Name)
			}
		}
		if podRunning {
			running++
		}
		ready := 0.0
		if p.Ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready, p.Namespace, p.Name, p.UID)
	})
	ch <- prometheus.MustNewConstMetric(descRunningPods, prometheus.GaugeValue, float64(running))
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(descContainers, prometheus.GaugeValue, float64(n), containerStates[s])
	}
	ch <- prometheus.MustNewConstMetric(descDesired, prometheus.GaugeValue, float64(pods), "true")
	ch <- prometheus.MustNewConstMetric(descDesired, prometheus.GaugeValue, 0, "false")
	if nr, ok := c.a.(NodeReporter); ok {
		ch <- prometheus.MustNewConstMetric(descNodeName, prometheus.GaugeValue, 1, nr.NodeName())
	}
	ch <- prometheus.MustNewConstMetric(descProblems, prometheus.GaugeValue, float64(len(c.a.Problems())))
	if t, ok := c.a.(Timer); ok {
		s := t.PodStartDurations()
		ch <- prometheus.MustNewConstHistogram(descPodStart, s.Count, s.Sum, s.Buckets)
		for op, s := range t.PodWorkerDurations() {
			ch <- prometheus.MustNewConstHistogram(descPodWorker, s.Count, s.Sum, s.Buckets, op)
		}
	}
	if uc, ok := c.a.(URLRequestCounter); ok {
		if total, failed, ok := uc.URLRequests(); ok {
			ch <- prometheus.MustNewConstMetric(descURLRequests, prometheus.CounterValue, float64(total-failed), "success")
			ch <- prometheus.MustNewConstMetric(descURLRequests, prometheus.CounterValue, float64(failed), "failure")
		}
	}
	if ec, ok := c.a.(EvictionCounter); ok {
		for signal, n := range ec.Evictions() {
			ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(n), signal)
		}
	}
}

// cAdvisor's names and labels (cadvisor metrics/prometheus.go), as the
// kubelet's /metrics/cadvisor serves them: id, image, name, and the
// container, pod and namespace of the container's Kubernetes labels.
var cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

var (
	descCPU        = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", append(cadvisorLabels, "cpu"), nil)
	descMemUsage   = prometheus.NewDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels, nil)
	descMemWS      = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set in bytes.", cadvisorLabels, nil)
	descMemRSS     = prometheus.NewDesc("container_memory_rss", "Size of RSS in bytes.", cadvisorLabels, nil)
	descProcesses  = prometheus.NewDesc("container_processes", "Number of processes running inside the container.", cadvisorLabels, nil)
	descMemLimit   = prometheus.NewDesc("container_spec_memory_limit_bytes", "Memory limit for the container.", cadvisorLabels, nil)
	descCPUShares  = prometheus.NewDesc("container_spec_cpu_shares", "CPU share of the container.", cadvisorLabels, nil)
	descCPUQuota   = prometheus.NewDesc("container_spec_cpu_quota", "CPU quota of the container.", cadvisorLabels, nil)
	descCPUPeriod  = prometheus.NewDesc("container_spec_cpu_period", "CPU period of the container.", cadvisorLabels, nil)
	descStartTime  = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", cadvisorLabels, nil)
	descFsUsage    = prometheus.NewDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", append(cadvisorLabels, "device"), nil)
	descScrapeErrs = prometheus.NewDesc("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	descMemCache   = prometheus.NewDesc("container_memory_cache", "Number of bytes of page cache memory.", cadvisorLabels, nil)
	// Under a CPU quota only, as cAdvisor (its condition: the spec's quota).
	descCFSPeriods   = prometheus.NewDesc("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", cadvisorLabels, nil)
	descCFSThrottled = prometheus.NewDesc("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", cadvisorLabels, nil)
	descCFSThrTime   = prometheus.NewDesc("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", cadvisorLabels, nil)
	// The pod's network namespace, per interface, on the pod's series: under
	// containerd cAdvisor reports it for the sandbox only, whose container
	// label is empty too.
	netLabels      = append(append([]string{}, cadvisorLabels...), "interface")
	descNetRxBytes = prometheus.NewDesc("container_network_receive_bytes_total", "Cumulative count of bytes received", netLabels, nil)
	descNetRxPkts  = prometheus.NewDesc("container_network_receive_packets_total", "Cumulative count of packets received", netLabels, nil)
	descNetRxDrop  = prometheus.NewDesc("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", netLabels, nil)
	descNetRxErrs  = prometheus.NewDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", netLabels, nil)
	descNetTxBytes = prometheus.NewDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", netLabels, nil)
	descNetTxPkts  = prometheus.NewDesc("container_network_transmit_packets_total", "Cumulative count of packets transmitted", netLabels, nil)
	descNetTxDrop  = prometheus.NewDesc("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", netLabels, nil)
	descNetTxErrs  = prometheus.NewDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", netLabels, nil)
)

// cpuPeriod is the CFS period the runtime sets (100ms, the kubelet's).
const cpuPeriod = 100000

type cadvisorCollector struct{ a MetricsAgent }

func (cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCPU, descMemUsage, descMemWS, descMemRSS, descProcesses, descMemLimit,
		descCPUShares, descCPUQuota, descCPUPeriod, descStartTime, descFsUsage, descScrapeErrs, descMemCache,
		descCFSPeriods, descCFSThrottled, descCFSThrTime, descNetRxBytes, descNetRxPkts, descNetRxDrop, descNetRxErrs,
		descNetTxBytes, descNetTxPkts, descNetTxDrop, descNetTxErrs} {
		ch <- d
	}
}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	nr, ok := c.a.(NodeReporter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s, err := nr.StatsSummary(ctx)
	scrapeErr := 0.0
	if err != nil {
		scrapeErr = 1
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErrs, prometheus.GaugeValue, scrapeErr)
	if s == nil {
		return
	}
	// What the pods' status and spec say of each container, by name: of
	// two pods of one name (an older generation stopping beside the new),
	// the one Pods lists last.
	type key struct{ ns, pod, container string }
	type figures struct {
		image                             string
		running                           bool
		started                           time.Time
		spec                              bool // the figures below are the spec's
		memoryLimit, cpuRequest, cpuLimit int64
	}
	n := 0
	for i := range s.Pods {
		n += len(s.Pods[i].Containers)
	}
	containers := make(map[key]figures, n)
	podQuota := make(map[string]bool, len(s.Pods))
	c.a.PodFigures(func(p *status.Figures) {
		podQuota[p.UID] = p.CPUQuota
		for _, sp := range p.Specs {
			k := key{p.Namespace, p.Name, sp.Name}
			f := containers[k]
			f.spec, f.memoryLimit, f.cpuRequest, f.cpuLimit = true, sp.MemoryLimit, sp.CPURequestMilli, sp.CPULimitMilli
			containers[k] = f
		}
		for _, cs := range p.Statuses {
			k := key{p.Namespace, p.Name, cs.Name}
			f := containers[k]
			f.image, f.running, f.started = cs.Image, cs.State == status.StateRunning, cs.StartedAt
			containers[k] = f
		}
	})
	at := s.Node.Time
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...))
	}
	cfs := func(u podspec.Usage, labels []string) {
		counter(descCFSPeriods, float64(u.CPUPeriods), labels...)
		counter(descCFSThrottled, float64(u.CPUThrottledPeriods), labels...)
		counter(descCFSThrTime, float64(u.CPUThrottledNanos)/1e9, labels...)
	}
	// The node: cAdvisor's root cgroup, id "/".
	root := []string{"", "/", "", "", "", ""}
	gauge(descMemUsage, float64(s.Node.MemoryUsage), root...)
	gauge(descMemWS, float64(s.Node.MemoryWorkingSet), root...)
	for _, p := range s.Pods {
		// The pod's own cgroup: container "" (cAdvisor's pod-level series).
		podLabels := []string{"", "pod" + p.UID, "", "", p.Namespace, p.Name}
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, float64(p.CPUUsageNanos)/1e9, append(podLabels, "total")...))
		gauge(descMemUsage, float64(p.MemoryUsage), podLabels...)
		gauge(descMemWS, float64(p.MemoryWorkingSet), podLabels...)
		gauge(descMemRSS, float64(p.MemoryRSS), podLabels...)
		gauge(descMemCache, float64(p.MemoryCache), podLabels...)
		gauge(descProcesses, float64(p.Pids), podLabels...)
		if podQuota[p.UID] {
			cfs(p.Usage, podLabels)
		}
		for _, i := range p.Network {
			l := append(podLabels[:len(podLabels):len(podLabels)], i.Name)
			counter(descNetRxBytes, float64(i.RxBytes), l...)
			counter(descNetRxPkts, float64(i.RxPackets), l...)
			counter(descNetRxDrop, float64(i.RxDropped), l...)
			counter(descNetRxErrs, float64(i.RxErrors), l...)
			counter(descNetTxBytes, float64(i.TxBytes), l...)
			counter(descNetTxPkts, float64(i.TxPackets), l...)
			counter(descNetTxDrop, float64(i.TxDropped), l...)
			counter(descNetTxErrs, float64(i.TxErrors), l...)
		}
		for _, cst := range p.Containers {
			f := containers[key{p.Namespace, p.Name, cst.Name}]
			labels := []string{cst.Name, cst.ID, f.image, cst.ID, p.Namespace, p.Name}
			ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, float64(cst.CPUUsageNanos)/1e9, append(labels, "total")...))
			gauge(descMemUsage, float64(cst.MemoryUsage), labels...)
			gauge(descMemWS, float64(cst.MemoryWorkingSet), labels...)
			gauge(descMemRSS, float64(cst.MemoryRSS), labels...)
			gauge(descMemCache, float64(cst.MemoryCache), labels...)
			gauge(descProcesses, float64(cst.Pids), labels...)
			gauge(descFsUsage, float64(cst.RootfsBytes), append(labels, "rootfs")...)
			if f.running {
				gauge(descStartTime, float64(f.started.Unix()), labels...)
			}
			if f.spec {
				// The limits the runtime sets from the spec (the kubelet's
				// MilliCPUToShares and MilliCPUToQuota); 0 is none.
				gauge(descMemLimit, float64(f.memoryLimit), labels...)
				req := f.cpuRequest
				if req == 0 {
					req = f.cpuLimit
				}
				gauge(descCPUShares, float64(max(req*1024/1000, 2)), labels...)
				if lim := f.cpuLimit; lim > 0 {
					gauge(descCPUQuota, float64(max(lim*cpuPeriod/1000, 1000)), labels...)
					cfs(cst.Usage, labels)
				} else {
					gauge(descCPUQuota, 0, labels...)
				}
				gauge(descCPUPeriod, cpuPeriod, labels...)
			}
		}
	}
}

var descProbes = prometheus.NewDesc("prober_probe_total", "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}, nil)

type probeCollector struct{ a MetricsAgent }

func (probeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descProbes }

func (c probeCollector) Collect(ch chan<- prometheus.Metric) {
	pc, ok := c.a.(ProbeCounter)
	if !ok {
		return
	}
	// The prober's metrics: probe_type Liveness, Readiness or Startup;
	// result successful, failed or unknown.
	kinds := map[prober.Kind]string{prober.Liveness: "Liveness", prober.Readiness: "Readiness", prober.Startup: "Startup"}
	results := map[prober.Result]string{prober.Success: "successful", prober.Failure: "failed", prober.Unknown: "unknown"}
	for k, n := range pc.ProbeCounts() {
		ch <- prometheus.MustNewConstMetric(descProbes, prometheus.CounterValue, float64(n),
			kinds[k.Probe], results[k.Result], k.Container, k.Pod, k.Namespace, k.UID)
	}
}

// The kubelet's resource metrics (pkg/kubelet/metrics/collectors
// resource_metrics.go), which metrics-server reads for kubectl top.
var (
	descRNodeCPU  = prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	descRNodeMem  = prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil)
	descRCtrCPU   = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	descRCtrMem   = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	descRCtrStart = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	descRPodCPU   = prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	descRPodMem   = prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	descRScrape   = prometheus.NewDesc("scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	descRScrape2  = prometheus.NewDesc("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

type resourceCollector struct{ a MetricsAgent }

func (resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRNodeCPU, descRNodeMem, descRCtrCPU, descRCtrMem, descRCtrStart, descRPodCPU, descRPodMem, descRScrape, descRScrape2} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	nr, ok := c.a.(NodeReporter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s, err := nr.StatsSummary(ctx)
	scrapeErr := 0.0
	if err != nil {
		scrapeErr = 1
	}
	ch <- prometheus.MustNewConstMetric(descRScrape, prometheus.GaugeValue, scrapeErr)
	ch <- prometheus.MustNewConstMetric(descRScrape2, prometheus.GaugeValue, scrapeErr)
	if s == nil {
		return
	}
	at := s.Node.Time
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(d, t, v, labels...))
	}
	emit(descRNodeCPU, prometheus.CounterValue, float64(s.Node.CPUUsageNanos)/1e9)
	emit(descRNodeMem, prometheus.GaugeValue, float64(s.Node.MemoryWorkingSet))
	// When each running container started, by name: of two pods of one
	// name, the last Pods lists that has it running.
	type key struct{ ns, pod, container string }
	started := map[key]time.Time{}
	c.a.PodFigures(func(p *status.Figures) {
		for _, cs := range p.Statuses {
			if cs.State == status.StateRunning {
				started[key{p.Namespace, p.Name, cs.Name}] = cs.StartedAt
			}
		}
	})
	for _, p := range s.Pods {
		emit(descRPodCPU, prometheus.CounterValue, float64(p.CPUUsageNanos)/1e9, p.Name, p.Namespace)
		emit(descRPodMem, prometheus.GaugeValue, float64(p.MemoryWorkingSet), p.Name, p.Namespace)
		for _, cst := range p.Containers {
			emit(descRCtrCPU, prometheus.CounterValue, float64(cst.CPUUsageNanos)/1e9, cst.Name, p.Name, p.Namespace)
			emit(descRCtrMem, prometheus.GaugeValue, float64(cst.MemoryWorkingSet), cst.Name, p.Name, p.Namespace)
			if t, ok := started[key{p.Namespace, p.Name, cst.Name}]; ok {
				ch <- prometheus.MustNewConstMetric(descRCtrStart, prometheus.GaugeValue, float64(t.UnixNano())/1e9, cst.Name, p.Name, p.Namespace)
			}
		}
	}
}
