package cri

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// fakeAgent is one static pod, etcd-node1, with a running container and an
// exited one before it.
type fakeAgent struct {
	mu      sync.Mutex
	pods    []v1.Pod
	sbs     []string
	ctrs    []podspec.ContainerStatus
	stopped []string
	exec    func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error)
}

const (
	podUID  = "0123456789abcdef0123456789abcdef"
	ctrID   = "c0ffee0000000000000000000000000000000000000000000000000000000001"
	oldID   = "c0ffef0000000000000000000000000000000000000000000000000000000000"
	logPath = "/var/log/pods/kube-system_etcd-node1_" + podUID + "/etcd/1.log"
)

func newFakeAgent() *fakeAgent {
	start := metav1.NewTime(time.Unix(1700000000, 0))
	created := time.Unix(1700000001, 0)
	return &fakeAgent{
		pods: []v1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd-node1", Namespace: "kube-system", UID: types.UID(podUID),
				Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
				Annotations: map[string]string{"kubernetes.io/config.hash": podUID, "kubernetes.io/config.source": "file"}},
			Spec:   v1.PodSpec{HostNetwork: true},
			Status: v1.PodStatus{StartTime: &start, Phase: v1.PodRunning},
		}},
		sbs: []string{podUID},
		ctrs: []podspec.ContainerStatus{
			{ID: oldID, PodUID: podUID, PodName: "etcd-node1", PodNamespace: "kube-system", Name: "etcd", Attempt: 0,
				Hash: "1a2b", Image: "registry.k8s.io/etcd:3.6.0-0", ImageID: "sha256:aa", ImageRef: "sha256:aa",
				State: podspec.StateExited, CreatedAt: created, StartedAt: created, FinishedAt: created.Add(time.Second),
				ExitCode: 1, Reason: "Error", LogPath: strings.Replace(logPath, "1.log", "0.log", 1)},
			{ID: ctrID, PodUID: podUID, PodName: "etcd-node1", PodNamespace: "kube-system", Name: "etcd", Attempt: 1,
				Hash: "1a2b", Image: "registry.k8s.io/etcd:3.6.0-0", ImageID: "sha256:aa", ImageRef: "sha256:aa",
				State: podspec.StateRunning, Pid: 4242, CreatedAt: created.Add(2 * time.Second), StartedAt: created.Add(2 * time.Second),
				LogPath: logPath, TerminationGracePeriod: 30 * time.Second, StopSignal: syscall.Signal(37)},
		},
	}
}

func (f *fakeAgent) Pods() []v1.Pod { return f.pods }
func (f *fakeAgent) Containers(context.Context) ([]podspec.ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]podspec.ContainerStatus(nil), f.ctrs...), nil
}
func (f *fakeAgent) Sandboxes(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sbs...), nil
}
func (f *fakeAgent) SandboxStatus(context.Context, string) (podspec.SandboxStatus, error) {
	return podspec.SandboxStatus{IPs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}, Network: "bridge"}, nil
}
func (f *fakeAgent) StatsSummary(context.Context) (*podspec.Summary, error) {
	u := podspec.Usage{CPUUsageNanos: 5e9, MemoryUsage: 100 << 20, MemoryWorkingSet: 80 << 20, MemoryRSS: 60 << 20, Pids: 7}
	return &podspec.Summary{Node: podspec.NodeStats{Time: time.Now()}, Pods: []podspec.PodStats{{
		UID: podUID, Namespace: "kube-system", Name: "etcd-node1", Usage: u,
		Containers: []podspec.ContainerStats{{ID: ctrID, Name: "etcd", Usage: u, RootfsBytes: 4096}},
	}}}, nil
}
func (f *fakeAgent) Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
	return f.exec(ctx, id, spec)
}
func (f *fakeAgent) StopPod(_ context.Context, uid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, uid)
	f.sbs, f.ctrs = nil, nil
	return nil
}

// serve starts the server on a socket in a temporary directory and returns
// a client connected to it.
func serve(t *testing.T, a Agent) (runtimeapi.RuntimeServiceClient, string) {
	t.Helper()
	s, err := New(Config{Agent: a, Version: "v9.9.9", ManifestDir: "/etc/kubernetes/manifests", CgroupDriver: "systemd",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// As the kubelet's and crictl's client (k8s.io/cri-client): 16 MiB.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxSendMsgSize), grpc.MaxCallSendMsgSize(maxSendMsgSize)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), sock
}

func TestVersionStatusConfig(t *testing.T) {
	c, _ := serve(t, newFakeAgent())
	ctx := context.Background()
	v, err := c.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "staticpodd" || v.RuntimeVersion != "v9.9.9" || v.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %v", v)
	}
	st, err := c.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, cond := range st.Status.Conditions {
		ready[cond.Type] = cond.Status
	}
	if !ready[runtimeapi.RuntimeReady] || !ready[runtimeapi.NetworkReady] {
		t.Errorf("conditions = %v", st.Status.Conditions)
	}
	if !strings.Contains(st.Info["config"], `"cgroupDriver":"systemd"`) {
		t.Errorf("verbose info = %v", st.Info)
	}
	rc, err := c.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Linux.CgroupDriver != runtimeapi.CgroupDriver_SYSTEMD {
		t.Errorf("cgroup driver = %v", rc.Linux.CgroupDriver)
	}
}

func TestSandboxesAndContainers(t *testing.T) {
	c, _ := serve(t, newFakeAgent())
	ctx := context.Background()
	sbs, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs.Items) != 1 {
		t.Fatalf("sandboxes = %v", sbs.Items)
	}
	sb := sbs.Items[0]
	if sb.Id != podUID || sb.Metadata.Name != "etcd-node1" || sb.Metadata.Namespace != "kube-system" || sb.Metadata.Uid != podUID ||
		sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || sb.CreatedAt != time.Unix(1700000000, 0).UnixNano() {
		t.Errorf("sandbox = %v", sb)
	}
	if sb.Labels[labelPodName] != "etcd-node1" || sb.Labels["component"] != "etcd" || sb.Annotations["kubernetes.io/config.hash"] != podUID {
		t.Errorf("labels %v annotations %v", sb.Labels, sb.Annotations)
	}
	for _, f := range []*runtimeapi.PodSandboxFilter{
		{Id: "nope"},
		{LabelSelector: map[string]string{"component": "kube-apiserver"}},
		{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
	} {
		if got, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f}); err != nil || len(got.Items) != 0 {
			t.Errorf("filter %v: %v, %v", f, got, err)
		}
	}
	if got, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: podUID[:6],
		LabelSelector: map[string]string{labelPodNamespace: "kube-system"}}}); err != nil || len(got.Items) != 1 {
		t.Errorf("filter by prefix and label: %v, %v", got, err)
	}

	pst, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podUID[:8], Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if pst.Status.Network.Ip != "10.0.0.5" || pst.Status.Linux.Namespaces.Options.Network != runtimeapi.NamespaceMode_NODE ||
		!strings.Contains(pst.Info["info"], ctrID) {
		t.Errorf("sandbox status = %v, info %v", pst.Status, pst.Info)
	}
	if _, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "ffff"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown sandbox: %v, want NotFound", err)
	}

	cs, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Containers) != 2 {
		t.Fatalf("containers = %v", cs.Containers)
	}
	running, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, PodSandboxId: podUID,
		LabelSelector: map[string]string{labelContainerName: "etcd"}}})
	if err != nil || len(running.Containers) != 1 || running.Containers[0].Id != ctrID {
		t.Fatalf("running containers = %v, %v", running, err)
	}
	ct := running.Containers[0]
	if ct.Metadata.Name != "etcd" || ct.Metadata.Attempt != 1 || ct.PodSandboxId != podUID || ct.Image.Image != "registry.k8s.io/etcd:3.6.0-0" ||
		ct.Annotations["io.kubernetes.container.restartCount"] != "1" || ct.Annotations["io.kubernetes.container.hash"] != "1a2b" ||
		ct.Labels[labelPodUID] != podUID {
		t.Errorf("container = %v", ct)
	}
	// "c0ffe" is the prefix of both: ambiguous.
	if _, err := c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "c0ffe"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ambiguous prefix: %v", err)
	}
	cst, err := c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrID, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if cst.Status.StopSignal != runtimeapi.Signal_SIGNAL_SIGRTMINPLUS3 {
		t.Errorf("stop signal %v, want SIGRTMIN+3", cst.Status.StopSignal)
	}
	if cst.Status.LogPath != logPath || cst.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING || cst.Status.StartedAt == 0 {
		t.Errorf("container status = %v", cst.Status)
	}
	var info struct {
		SandboxID string `json:"sandboxID"`
		Pid       int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(cst.Info["info"]), &info); err != nil || info.SandboxID != podUID || info.Pid != 4242 {
		t.Errorf("info = %q (%v)", cst.Info["info"], err)
	}
	old, err := c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: oldID})
	if err != nil || old.Status.ExitCode != 1 || old.Status.Reason != "Error" || old.Status.FinishedAt == 0 {
		t.Errorf("exited container status = %v, %v", old, err)
	}
}

func TestStats(t *testing.T) {
	c, _ := serve(t, newFakeAgent())
	ctx := context.Background()
	s, err := c.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: ctrID})
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats.Cpu.UsageCoreNanoSeconds.Value != 5e9 || s.Stats.Memory.WorkingSetBytes.Value != 80<<20 || s.Stats.WritableLayer.UsedBytes.Value != 4096 {
		t.Errorf("container stats = %v", s.Stats)
	}
	ls, err := c.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil || len(ls.Stats) != 1 || ls.Stats[0].Attributes.Id != ctrID {
		t.Errorf("container stats list = %v, %v", ls, err)
	}
	ps, err := c.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podUID})
	if err != nil {
		t.Fatal(err)
	}
	if ps.Stats.Linux.Process.ProcessCount.Value != 7 || len(ps.Stats.Linux.Containers) != 1 {
		t.Errorf("sandbox stats = %v", ps.Stats)
	}
	lps, err := c.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil || len(lps.Stats) != 1 {
		t.Errorf("sandbox stats list = %v, %v", lps, err)
	}
}

func TestExecSync(t *testing.T) {
	a := newFakeAgent()
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		switch spec.Cmd[0] {
		case "echo":
			io.WriteString(spec.Stdout, strings.Join(spec.Cmd[1:], " "))
			io.WriteString(spec.Stderr, "err")
			return 3, nil
		case "flood":
			// A process that writes without end: Exec drops the rest of a
			// stream once a write fails, and the process goes on.
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range 1000 {
				if _, err := spec.Stdout.Write(chunk); err != nil {
					return 0, nil
				}
			}
			return 0, errors.New("the flood was never cut")
		case "sleep":
			<-ctx.Done()
			return -1, ctx.Err()
		}
		return 0, podspec.ErrCommandNotFound
	}
	c, _ := serve(t, a)
	ctx := context.Background()
	r, err := c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctrID, Cmd: []string{"echo", "a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "a b" || string(r.Stderr) != "err" || r.ExitCode != 3 {
		t.Errorf("ExecSync = %q %q %d", r.Stdout, r.Stderr, r.ExitCode)
	}
	r, err = c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctrID, Cmd: []string{"flood"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) != maxExecSyncOutput {
		t.Errorf("flood kept %d bytes, want %d", len(r.Stdout), maxExecSyncOutput)
	}
	begin := time.Now()
	_, err = c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctrID, Cmd: []string{"sleep"}, Timeout: 1})
	if status.Code(err) != codes.DeadlineExceeded || time.Since(begin) > 30*time.Second {
		t.Errorf("timed out exec: %v after %s", err, time.Since(begin))
	}
	if got := execTimeout(&runtimeapi.ExecSyncRequest{Timeout: 1 << 62}); got != maxExecSyncTimeout {
		t.Errorf("a timeout of 2^62 s runs for %s, want %s", got, maxExecSyncTimeout)
	}
	r, err = c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctrID, Cmd: []string{"nope"}})
	if err != nil || r.ExitCode != 127 {
		t.Errorf("command not found: %v, %v", r, err)
	}
	if _, err := c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: oldID, Cmd: []string{"echo"}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("exec in an exited container: %v", err)
	}
	// An oversized request is refused before it is read whole.
	huge := strings.Repeat("x", maxRecvMsgSize)
	if _, err := c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctrID, Cmd: []string{"echo", huge}}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized request: %v, want ResourceExhausted", err)
	}
}

func TestUnimplementedNamesManifests(t *testing.T) {
	c, _ := serve(t, newFakeAgent())
	_, err := c.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "/etc/kubernetes/manifests") {
		t.Errorf("RunPodSandbox: %v", err)
	}
	_, err = c.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "manifest") {
		t.Errorf("CreateContainer: %v", err)
	}
}

func TestStopRemoveSandbox(t *testing.T) {
	a := newFakeAgent()
	c, _ := serve(t, a)
	ctx := context.Background()
	if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podUID[:10]}); err != nil {
		t.Fatal(err)
	}
	// Listed NOTREADY, as containerd lists a stopped sandbox, until removed.
	sbs, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(sbs.Items) != 1 || sbs.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY ||
		sbs.Items[0].Metadata.Name != "etcd-node1" {
		t.Errorf("sandboxes after StopPodSandbox: %v, %v; want etcd-node1 NOTREADY", sbs, err)
	}
	st, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podUID})
	if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("status of a stopped sandbox: %v, %v", st, err)
	}
	if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podUID}); err != nil {
		t.Errorf("stop a stopped sandbox: %v", err)
	}
	if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podUID[:4]}); err != nil {
		t.Errorf("remove a stopped sandbox: %v", err)
	}
	if _, err := c.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctrID}); err != nil {
		t.Errorf("stop a container that is gone: %v", err)
	}
	if len(a.stopped) != 1 || a.stopped[0] != podUID {
		t.Errorf("pods stopped = %v, want the one, once", a.stopped)
	}
	sbs, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(sbs.Items) != 0 {
		t.Errorf("sandboxes after removal: %v, %v", sbs, err)
	}
}

// TestExecStream runs an exec through the streaming server as crictl exec
// -it does (SPDY, a terminal, its size), while a client that holds a
// connection without a word and another exec that never ends wait.
func TestExecStream(t *testing.T) {
	a := newFakeAgent()
	hold := make(chan struct{})
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		if spec.Cmd[0] == "hold" {
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return 0, nil
		}
		if id != ctrID || !spec.TTY || spec.Stderr != nil {
			return 1, errors.New("wrong exec")
		}
		// The terminal's size at start, then its new size.
		var sz podspec.TermSize
		for sz.Width != 3 {
			if sz = <-spec.Resize; sz.Height != 24 {
				return 1, errors.New("wrong size")
			}
		}
		in, _ := io.ReadAll(spec.Stdin)
		io.WriteString(spec.Stdout, "got "+string(in)+" at "+strings.Repeat("-", int(sz.Width)))
		return 7, nil
	}
	c, sock := serve(t, a)
	ctx := context.Background()

	// A client that connects and says nothing.
	idle, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// An exec that holds its stream.
	holdResp, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctrID, Cmd: []string{"hold"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	holding := make(chan error, 1)
	go func() { holding <- stream(holdResp.Url, remotecommand.StreamOptions{Stdout: io.Discard}) }()
	defer close(hold)

	resp, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctrID[:12], Cmd: []string{"sh"}, Tty: true, Stdin: true, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(resp.Url); err != nil || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("exec URL %q (%v): want one on 127.0.0.1", resp.Url, err)
	}
	var out bytes.Buffer
	sizes := &sizeQueue{sizes: []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 3, Height: 24}}}
	err = stream(resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("hi"), Stdout: &out, Tty: true, TerminalSizeQueue: sizes})
	var exit interface{ ExitStatus() int }
	if !errors.As(err, &exit) || exit.ExitStatus() != 7 {
		t.Errorf("exec ended with %v, want exit code 7", err)
	}
	if out.String() != "got hi at ---" {
		t.Errorf("exec output %q", out.String())
	}
	// A token is good once.
	if err := stream(resp.Url, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil {
		t.Error("the exec URL worked twice")
	}
	select {
	case err := <-holding:
		t.Fatalf("the held exec ended: %v", err)
	default:
	}
}

func stream(u string, opts remotecommand.StreamOptions) error {
	parsed, err := url.Parse(u)
	if err != nil {
		return err
	}
	e, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", parsed)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.StreamWithContext(ctx, opts)
}

type sizeQueue struct {
	mu    sync.Mutex
	sizes []remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sizes) == 0 {
		return nil
	}
	s := q.sizes[0]
	q.sizes = q.sizes[1:]
	return &s
}

// TestSilentConnectionsLetGo: clients that take every connection and never
// speak are closed once the HTTP/2 preface is overdue, and the next client
// is served.
func TestSilentConnectionsLetGo(t *testing.T) {
	c, sock := serve(t, newFakeAgent())
	for range MaxConns + 4 {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*connectionTimeout)
	defer cancel()
	begin := time.Now()
	if _, err := c.Version(ctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("Version with every connection held by silent clients: %v after %s", err, time.Since(begin))
	}
}

// A client of the exec streaming server that keeps its connection open after
// an answer would hold one of its slots for ever: the server closes every
// connection after its one request.
func TestStreamConnectionsNotKeptAlive(t *testing.T) {
	c, _ := serve(t, newFakeAgent())
	resp, err := c.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: ctrID, Cmd: []string{"true"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The answer, then the end of the connection; a connection kept alive
	// would only end at this deadline, an error.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("after %q: %v, want the connection closed after the answer", b, err)
	}
	if !strings.HasPrefix(string(b), "HTTP/1.1 404") {
		t.Errorf("answer %q", b)
	}
}
