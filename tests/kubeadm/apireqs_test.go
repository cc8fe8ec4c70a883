//go:build kubeadm

package kubeadm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The API server's audit of the node's own user, at level Metadata, for
// counting the node agent's requests: every request is logged once when it
// is received (a watch too, however long it then lasts), and once more when
// it completes, with its status code; everyone else's requests are not.
const (
	auditDir    = "/etc/kubernetes/audit"
	auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
`
	// The ClusterConfiguration's apiServer: the policy and the log in a
	// directory of the machine's /etc/kubernetes, which kubeadm mounts
	// into the API server's pod.
	auditAPIServer = `apiServer:
  extraArgs:
  - name: audit-policy-file
    value: ` + auditDir + `/policy.yaml
  - name: audit-log-path
    value: ` + auditDir + `/audit.log
  extraVolumes:
  - name: audit
    hostPath: ` + auditDir + `
    mountPath: ` + auditDir + `
    pathType: DirectoryOrCreate
`
	// The addons' pods are not the node's static pods: on a staticpodd
	// node they are refused, on the kubelet's they would run (kube-proxy's
	// image is a stand-in here, and would crash-loop); either way their
	// requests are not what is measured.
	apireqsInit = "kubeadm init --config kubeadm.yaml --skip-phases=addon/coredns,addon/kube-proxy"
)

// TestAPIRequests is the API server requests per minute of a node at
// steady state: kubeadm init on one machine with staticpodd as its kubelet
// and on another with the real kubelet v1.37.2 on Debian's containerd, at
// the same time, each its own control plane, with the same kubeadm
// configuration but for the CRI socket and this host's kubelet fields, and
// the kubelet.conf kubeadm writes. Once the Node is Ready and the four
// mirror pods are Running and Ready, after STATICPODD_APIREQS_SETTLE (30 s),
// the audit log's requests of the node's user received within
// STATICPODD_APIREQS_WINDOW (3 minutes) are counted by user agent, verb and
// resource. STATICPODD_APIREQS_RUNS (1) runs. A benchmark of several
// minutes, not a check: it runs only with STATICPODD_APIREQS=1 (make
// bench-apireqs), and fails only if a side does not come up.
func TestAPIRequests(t *testing.T) {
	if os.Getenv("STATICPODD_APIREQS") == "" {
		t.Skip("a benchmark of several minutes: make bench-apireqs runs it (STATICPODD_APIREQS=1)")
	}
	kubelet := os.Getenv("STATICPODD_KUBELET")
	if kubelet == "" {
		t.Fatal("STATICPODD_KUBELET is not set: make bench-apireqs builds the kubelet and sets it")
	}
	settle := envDuration(t, "STATICPODD_APIREQS_SETTLE", 30*time.Second)
	window := envDuration(t, "STATICPODD_APIREQS_WINDOW", 3*time.Minute)
	runs := 1
	if s := os.Getenv("STATICPODD_APIREQS_RUNS"); s != "" {
		var err error
		if runs, err = strconv.Atoi(s); err != nil || runs < 1 {
			t.Fatalf("STATICPODD_APIREQS_RUNS=%q", s)
		}
	}
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := testdaemon.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tars, err := cluster.Images(root, bin)
	if err != nil {
		t.Fatal(err)
	}
	tars = append(tars, addonImages(t)...)

	var totals [2][]float64 // staticpodd's, the kubelet's: per minute, per run
	for i := range runs {
		var mu sync.Mutex
		var sides [2]*requests
		t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) {
			side := func(n int, up func(t *testing.T) *Machine, down func(t *testing.T, m *Machine)) func(t *testing.T) {
				return func(t *testing.T) {
					t.Parallel()
					m := up(t)
					r := measureRequests(t, m, settle, window)
					mu.Lock()
					sides[n] = r
					mu.Unlock()
					down(t, m)
				}
			}
			t.Run("staticpodd", side(0, func(t *testing.T) *Machine {
				m := newMachine(t, bin, "cp1")
				for i, tar := range tars {
					name := fmt.Sprintf("image-%d.tar", i)
					copyFile(t, tar, m.Host("/root/"+name))
					m.Sh(2*time.Minute, "staticpodd images import "+name)
				}
				apireqsInitOn(t, m, fmt.Sprintf(kubeadmYAML, m.Addr, m.Name), ignoredPreflight)
				return m
			}, resetStep))
			t.Run("kubelet", side(1, func(t *testing.T) *Machine {
				m := newKubeletMachine(t, bin, kubelet, "kubelet1", cluster.Address, tars, workerCNI)
				// A pod network, so that its Node is Ready as staticpodd's is.
				writeFile(t, filepath.Join(m.Dir, "net.d", "10-worker.conflist"), fmt.Sprintf(bridgeCNI, filepath.Join(m.Dir, "cni")))
				apireqsInitOn(t, m, fmt.Sprintf(kubeletKubeadmYAML, m.Addr, m.Name, m.Cgroup), kubeletIgnoredPreflight)
				return m
			}, func(t *testing.T, m *Machine) {
				t.Logf("%s$ kubeadm reset -f\n%s", m.Name, m.Sh(5*time.Minute, "kubeadm reset -f"))
			}))
		})
		if sides[0] == nil || sides[1] == nil {
			t.FailNow()
		}
		t.Logf("run %d, requests per minute of the node's user over %s (load average %s):\n%s",
			i+1, window, loadavg(), requestsTable(sides[0], sides[1]))
		for n, s := range sides {
			totals[n] = append(totals[n], s.perMinute(s.total()))
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("FIGURE API requests per minute per node at steady state (kubeadm's 4 static pods, mirror pods, Node, Lease; %d runs of %s, median [min, max]): staticpodd %.1f [%.1f, %.1f], kubelet v1.37.2 %.1f [%.1f, %.1f], ratio %.2f",
		runs, window, med(totals[0]), slices.Min(totals[0]), slices.Max(totals[0]),
		med(totals[1]), slices.Min(totals[1]), slices.Max(totals[1]), med(totals[0])/med(totals[1]))
}

// apireqsInitOn is kubeadm init on m with the kubeadm configuration cfg,
// audited, up to the Node Ready and its mirror pods Running and Ready.
func apireqsInitOn(t *testing.T, m *Machine, cfg string, ignored []string) {
	t.Helper()
	cfg = strings.Replace(cfg, "clusterName: air-gapped\n", "clusterName: air-gapped\n"+auditAPIServer, 1)
	writeFile(t, m.Host("/root/kubeadm.yaml"), cfg)
	if err := os.MkdirAll(m.Host(auditDir), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Host(auditDir+"/policy.yaml"), auditPolicy)
	line := apireqsInit + ignoring(ignored)
	out, _ := timedSh(t, m, 6*time.Minute, line, initialized)
	t.Logf("%s$ %s\n%s", m.Name, line, out)
	waitMirrors(t, m, true)
}

// requests are one node's requests in a window, by user agent, verb and
// resource.
type requests struct {
	window time.Duration
	agents []string // the user agents seen
	count  map[reqKey]int
	failed map[reqKey]int // of which answered with a status >= 400
	// renewals are when the Lease's updates were received: their mean
	// period is the renewal interval plus what each update took.
	renewals []time.Time
}

// renewalPeriod is the mean time between two Lease updates, 0 if fewer
// than two.
func (r *requests) renewalPeriod() time.Duration {
	if len(r.renewals) < 2 {
		return 0
	}
	return r.renewals[len(r.renewals)-1].Sub(r.renewals[0]) / time.Duration(len(r.renewals)-1)
}

type reqKey struct{ verb, resource string }

func (r *requests) total() int {
	n := 0
	for _, c := range r.count {
		n += c
	}
	return n
}

func (r *requests) perMinute(n int) float64 { return float64(n) / r.window.Minutes() }

// auditEvent is what is read of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage      string `json:"stage"`
	AuditID    string `json:"auditID"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// measureRequests waits settle, then window, and counts the requests of m's
// node user received in the window from the audit log.
func measureRequests(t *testing.T, m *Machine, settle, window time.Duration) *requests {
	t.Helper()
	from := time.Now().Add(settle)
	to := from.Add(window)
	// The measurement is the window itself; a request received before its
	// end is logged before it is answered (the log's blocking mode).
	time.Sleep(time.Until(to) + 2*time.Second)
	f, err := os.Open(m.Host(auditDir + "/audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &requests{window: window, count: map[reqKey]int{}, failed: map[reqKey]int{}}
	user := "system:node:" + m.Name
	keys := map[string]reqKey{} // by audit ID, of the requests counted
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v: %s", err, sc.Bytes())
		}
		if e.User.Username != user || e.RequestReceivedTimestamp.Before(from) || !e.RequestReceivedTimestamp.Before(to) {
			continue
		}
		switch e.Stage {
		case "RequestReceived":
			k := reqKey{verb: e.Verb, resource: resourceOf(&e)}
			r.count[k]++
			keys[e.AuditID] = k
			if k == (reqKey{verb: "update", resource: "leases"}) {
				r.renewals = append(r.renewals, e.RequestReceivedTimestamp)
			}
			agent, _, _ := strings.Cut(e.UserAgent, " ")
			if !slices.Contains(r.agents, agent) {
				r.agents = append(r.agents, agent)
			}
		case "ResponseComplete":
			if k, ok := keys[e.AuditID]; ok && e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 {
				r.failed[k]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// resourceOf is resource[/subresource], or the path of a non-resource URL.
func resourceOf(e *auditEvent) string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		p, _, _ := strings.Cut(e.RequestURI, "?")
		return p
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// requestsTable is a Markdown table of both sides' requests per minute by
// verb and resource.
func requestsTable(spd, kubelet *requests) string {
	var keys []reqKey
	for _, r := range []*requests{spd, kubelet} {
		for k := range r.count {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b reqKey) int {
		return strings.Compare(a.resource+" "+a.verb, b.resource+" "+b.verb)
	})
	cell := func(r *requests, k reqKey) string {
		s := fmt.Sprintf("%.2f", r.perMinute(r.count[k]))
		if f := r.failed[k]; f > 0 {
			s += fmt.Sprintf(" (%d failed)", f)
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| verb | resource | staticpodd (%s) | kubelet (%s) |\n|---|---|---|---|\n",
		strings.Join(spd.agents, ", "), strings.Join(kubelet.agents, ", "))
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.verb, k.resource, cell(spd, k), cell(kubelet, k))
	}
	fmt.Fprintf(&b, "| **all** | | **%.2f** | **%.2f** |\n", spd.perMinute(spd.total()), kubelet.perMinute(kubelet.total()))
	fmt.Fprintf(&b, "Lease updates received every %.2f s (staticpodd), %.2f s (kubelet) on average\n",
		spd.renewalPeriod().Seconds(), kubelet.renewalPeriod().Seconds())
	return b.String()
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q", name, s)
	}
	return d
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
