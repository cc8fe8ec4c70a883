package cri

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Agent is staticpodd's state as the runtime service answers from it: the
// same sources as the CLI socket's and the node API's. Sandbox IDs are pod
// UIDs (a static pod's UID is its manifest's hash), container IDs the
// runtime's.
type Agent interface {
	// Pods are the pods with their status, as /pods shows them.
	Pods() []v1.Pod
	// Containers are every container the runtime has, running or exited.
	Containers(ctx context.Context) ([]podspec.ContainerStatus, error)
	// Sandboxes are the UIDs of the pods that have a sandbox.
	Sandboxes(ctx context.Context) ([]string, error)
	// SandboxStatus is a sandbox's place on the pod network.
	SandboxStatus(ctx context.Context, uid string) (podspec.SandboxStatus, error)
	// StatsSummary measures the node, the pods and their containers.
	StatsSummary(ctx context.Context) (*podspec.Summary, error)
	// Exec runs spec in the running container id; see agent.Runtime.Exec.
	Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error)
	// StopPod stops every container of the pod uid and removes them and its
	// sandbox, returning once nothing of it is left; the pod's worker makes
	// it again from its manifest, if it still has one, after a back-off.
	StopPod(ctx context.Context, uid string) error
}

// runtimeService is the CRI's RuntimeService.
type runtimeService struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	cfg     Config
	streams streaming.Server
	// streamURL is the streaming server's, for Status' verbose info.
	streamURL string

	mu sync.Mutex
	// stopped are the sandboxes StopPodSandbox removed, listed NOTREADY
	// until RemovePodSandbox or until the pod is made again, as
	// containerd lists a stopped sandbox: crictl stopp then rmp, and
	// kubeadm reset's list after a stop, find them.
	stopped map[string]*runtimeapi.PodSandbox
}

// maxStopped bounds the stopped sandboxes remembered: a node has at most
// a few hundred pods.
const maxStopped = 1024

// The runtime's name and API version, as Version answers them.
const (
	runtimeName = "staticpodd"
	apiVersion  = "v1"
	// kubeAPIVersion is the CRI's own version field, "0.1.0" for every
	// runtime (the kubelet ignores it).
	kubeAPIVersion = "0.1.0"
)

func (r *runtimeService) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: kubeAPIVersion, RuntimeName: runtimeName,
		RuntimeVersion: r.cfg.Version, RuntimeApiVersion: apiVersion}, nil
}

// Status: the runtime is ready while it serves; the network is ready once
// the runtime sets up pod networks (its bridge or a CNI configuration),
// which it always does here: a sandbox whose network failed says so itself.
func (r *runtimeService) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}
	if req.Verbose {
		info, _ := json.Marshal(map[string]any{
			"runtime":      runtimeName,
			"version":      r.cfg.Version,
			"cgroupDriver": r.cfg.CgroupDriver,
			"manifestDir":  r.cfg.ManifestDir,
			"streamServer": r.streamURL,
		})
		resp.Info = map[string]string{"config": string(info)}
	}
	return resp, nil
}

func (r *runtimeService) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	driver := runtimeapi.CgroupDriver_CGROUPFS
	if r.cfg.CgroupDriver == "systemd" {
		driver = runtimeapi.CgroupDriver_SYSTEMD
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: driver}}, nil
}

// view is one reading of the agent's state: the pods by UID, the
// sandboxes, the containers, and the sandboxes stopped through the CRI.
type view struct {
	pods       map[string]*v1.Pod
	sandboxes  []string
	containers []podspec.ContainerStatus
	stopped    map[string]*runtimeapi.PodSandbox
}

// ids are the IDs of the sandboxes listed: the runtime's, then the stopped.
func (v *view) ids() []string {
	return append(slices.Clone(v.sandboxes), slices.Sorted(maps.Keys(v.stopped))...)
}

func (r *runtimeService) view(ctx context.Context) (*view, error) {
	v := &view{pods: map[string]*v1.Pod{}}
	for _, p := range r.cfg.Agent.Pods() {
		v.pods[string(p.UID)] = &p
	}
	var err error
	if v.sandboxes, err = r.cfg.Agent.Sandboxes(ctx); err != nil {
		return nil, status.Errorf(codes.Internal, "list sandboxes: %v", err)
	}
	if v.containers, err = r.cfg.Agent.Containers(ctx); err != nil && v.containers == nil {
		return nil, status.Errorf(codes.Internal, "list containers: %v", err)
	}
	v.stopped = map[string]*runtimeapi.PodSandbox{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, sb := range r.stopped {
		if slices.Contains(v.sandboxes, uid) {
			delete(r.stopped, uid) // made again from its manifest
			continue
		}
		v.stopped[uid] = sb
	}
	return v, nil
}

// sandbox is the CRI's PodSandbox of uid.
func (v *view) sandbox(uid string) *runtimeapi.PodSandbox {
	if sb := v.stopped[uid]; sb != nil {
		return sb
	}
	sb := &runtimeapi.PodSandbox{Id: uid, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: uid}}
	if p := v.pods[uid]; p != nil {
		sb.Metadata.Name, sb.Metadata.Namespace = p.Name, p.Namespace
		sb.Labels, sb.Annotations = podLabels(p), maps.Clone(p.Annotations)
		if p.Status.StartTime != nil {
			sb.CreatedAt = p.Status.StartTime.UnixNano()
		}
	} else {
		// A pod no longer desired, being removed: its containers name it.
		for _, c := range v.containers {
			if c.PodUID == uid {
				sb.Metadata.Name, sb.Metadata.Namespace = c.PodName, c.PodNamespace
				sb.Labels = map[string]string{labelPodName: c.PodName, labelPodNamespace: c.PodNamespace, labelPodUID: uid}
				break
			}
		}
	}
	if sb.CreatedAt == 0 {
		for _, c := range v.containers {
			if c.PodUID == uid && !c.CreatedAt.IsZero() && (sb.CreatedAt == 0 || c.CreatedAt.UnixNano() < sb.CreatedAt) {
				sb.CreatedAt = c.CreatedAt.UnixNano()
			}
		}
	}
	return sb
}

// The kubelet's labels of sandboxes and containers (pkg/kubelet/types).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// podLabels are the kubelet's newPodLabels: the pod's labels and its name,
// namespace and UID.
func podLabels(p *v1.Pod) map[string]string {
	l := maps.Clone(p.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[labelPodName], l[labelPodNamespace], l[labelPodUID] = p.Name, p.Namespace, string(p.UID)
	return l
}

func (r *runtimeService) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	f := req.GetFilter()
	out := &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{}}
	for _, uid := range v.ids() {
		sb := v.sandbox(uid)
		if f != nil && (f.Id != "" && !strings.HasPrefix(sb.Id, f.Id) ||
			f.State != nil && f.State.State != sb.State || !matches(sb.Labels, f.LabelSelector)) {
			continue
		}
		out.Items = append(out.Items, sb)
	}
	return out, nil
}

func matches(labels, selector map[string]string) bool {
	for k, want := range selector {
		if got, ok := labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// findSandbox resolves id, a sandbox ID or a unique prefix of one, as
// containerd does.
func (v *view) findSandbox(id string) (string, error) {
	return unique("pod sandbox", id, v.ids())
}

func unique(what, id string, ids []string) (string, error) {
	if id == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s ID is required", what)
	}
	var found []string
	for _, x := range ids {
		if x == id {
			return x, nil
		}
		if strings.HasPrefix(x, id) {
			found = append(found, x)
		}
	}
	switch len(found) {
	case 0:
		return "", status.Errorf(codes.NotFound, "%s %q not found", what, id)
	case 1:
		return found[0], nil
	}
	return "", status.Errorf(codes.InvalidArgument, "%s ID %q is ambiguous: %d match", what, id, len(found))
}

func (r *runtimeService) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	uid, err := v.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	sb := v.sandbox(uid)
	st := &runtimeapi.PodSandboxStatus{Id: uid, Metadata: sb.Metadata, State: sb.State, CreatedAt: sb.CreatedAt,
		Labels: sb.Labels, Annotations: sb.Annotations, Network: &runtimeapi.PodSandboxNetworkStatus{}}
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		// Stopped: no network, nothing running.
		return &runtimeapi.PodSandboxStatusResponse{Status: st}, nil
	}
	net, netErr := r.cfg.Agent.SandboxStatus(ctx, uid)
	for i, ip := range net.IPs {
		if i == 0 {
			st.Network.Ip = ip.String()
			continue
		}
		st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip.String()})
	}
	if p := v.pods[uid]; p != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: namespaces(&p.Spec)}}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.Verbose {
		info := map[string]any{"network": net.Network, "message": net.Message}
		if netErr != nil {
			info["networkError"] = netErr.Error()
		}
		ids := []string{}
		for _, c := range v.containers {
			if c.PodUID == uid {
				ids = append(ids, c.ID)
			}
		}
		info["containers"] = ids
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// namespaces are the kubelet's namespacesForPod: the node's with
// hostNetwork, hostPID, hostIPC; else the pod's, and each container's own
// PID namespace unless the pod shares one.
func namespaces(spec *v1.PodSpec) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// container is the CRI's Container of c.
func (v *view) container(c podspec.ContainerStatus) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id: c.ID, PodSandboxId: c.PodUID,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(max(c.Attempt, 0))},
		Image:       &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image},
		ImageRef:    c.ImageRef,
		ImageId:     c.ImageID,
		State:       containerState(c.State),
		CreatedAt:   c.CreatedAt.UnixNano(),
		Labels:      v.containerLabels(c),
		Annotations: containerAnnotations(c),
	}
}

func containerState(s podspec.State) runtimeapi.ContainerState {
	switch s {
	case podspec.StateCreated:
		return runtimeapi.ContainerState_CONTAINER_CREATED
	case podspec.StateRunning:
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	case podspec.StateExited:
		return runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return runtimeapi.ContainerState_CONTAINER_UNKNOWN
}

// containerLabels are the kubelet's newContainerLabels: the pod's name,
// namespace and UID and the container's name.
func (v *view) containerLabels(c podspec.ContainerStatus) map[string]string {
	return map[string]string{labelPodName: c.PodName, labelPodNamespace: c.PodNamespace, labelPodUID: c.PodUID, labelContainerName: c.Name}
}

// containerAnnotations are the kubelet's newContainerAnnotations that
// staticpodd knows of a container: its hash, restart count, grace period,
// and the annotations it was started with.
func containerAnnotations(c podspec.ContainerStatus) map[string]string {
	a := maps.Clone(c.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a["io.kubernetes.container.hash"] = c.Hash
	a["io.kubernetes.container.restartCount"] = strconv.Itoa(c.Attempt)
	if c.TerminationGracePeriod > 0 {
		a["io.kubernetes.pod.terminationGracePeriod"] = strconv.Itoa(int(c.TerminationGracePeriod / time.Second))
	}
	return a
}

func (r *runtimeService) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	f := req.GetFilter()
	out := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{}}
	for _, c := range v.containers {
		ct := v.container(c)
		if f != nil && (f.Id != "" && !strings.HasPrefix(ct.Id, f.Id) ||
			f.PodSandboxId != "" && !strings.HasPrefix(ct.PodSandboxId, f.PodSandboxId) ||
			f.State != nil && f.State.State != ct.State || !matches(ct.Labels, f.LabelSelector)) {
			continue
		}
		out.Containers = append(out.Containers, ct)
	}
	return out, nil
}

// findContainer resolves id, a container ID or a unique prefix of one.
func (v *view) findContainer(id string) (podspec.ContainerStatus, error) {
	ids := make([]string, len(v.containers))
	for i, c := range v.containers {
		ids[i] = c.ID
	}
	full, err := unique("container", id, ids)
	if err != nil {
		return podspec.ContainerStatus{}, err
	}
	return v.containers[slices.Index(ids, full)], nil
}

func (r *runtimeService) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	c, err := v.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	ct := v.container(c)
	st := &runtimeapi.ContainerStatus{
		Id: c.ID, Metadata: ct.Metadata, State: ct.State, CreatedAt: ct.CreatedAt,
		Image: ct.Image, ImageRef: c.ImageRef, ImageId: c.ImageID,
		ExitCode: int32(c.ExitCode), Reason: c.Reason, Message: c.Message,
		Labels: ct.Labels, Annotations: ct.Annotations, LogPath: c.LogPath,
	}
	if !c.StartedAt.IsZero() {
		st.StartedAt = c.StartedAt.UnixNano()
	}
	if c.StopSignal != 0 {
		st.StopSignal = criSignal(c.StopSignal)
	}
	if !c.FinishedAt.IsZero() {
		st.FinishedAt = c.FinishedAt.UnixNano()
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.Verbose {
		// containerd's "info": what the runtime knows beyond the status.
		info := map[string]any{"sandboxID": c.PodUID, "pid": c.Pid, "logPath": c.LogPath,
			"image": c.Image, "imageID": c.ImageID, "restartCount": c.Attempt, "hash": c.Hash}
		if c.StopSignal != 0 {
			info["stopSignal"] = podspec.SignalName(c.StopSignal)
		}
		if c.TerminationGracePeriod > 0 {
			info["terminationGracePeriod"] = c.TerminationGracePeriod.String()
		}
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// signalNames turns the API's signal names into the CRI's Signal enum's:
// SIGRTMIN+3 is SIGNAL_SIGRTMINPLUS3.
var signalNames = strings.NewReplacer("+", "PLUS", "-", "MINUS")

// criSignal is the CRI's Signal for sig; RUNTIME_DEFAULT for one it has not.
func criSignal(sig syscall.Signal) runtimeapi.Signal {
	return runtimeapi.Signal(runtimeapi.Signal_value["SIGNAL_"+signalNames.Replace(podspec.SignalName(sig))])
}

// ReopenContainerLog: staticpodd's container monitor rotates its log file
// itself (containerLogMaxSize) and reopens it then, so there is nothing to
// reopen; like containerd it refuses a container that does not run.
func (r *runtimeService) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	c, err := v.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	if c.State != podspec.StateRunning {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running", c.ID)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// StopPodSandbox stops and removes the pod now, sandbox and all; see
// Agent.StopPod. A sandbox that is gone already is stopped: the call is
// idempotent, as the CRI asks.
func (r *runtimeService) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := r.stopPod(ctx, req.PodSandboxId); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox is StopPodSandbox, which removed the sandbox already,
// and forgets the stopped sandbox.
func (r *runtimeService) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := r.stopPod(ctx, req.PodSandboxId); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, err := unique("pod sandbox", req.PodSandboxId, slices.Collect(maps.Keys(r.stopped))); err == nil {
		delete(r.stopped, uid)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *runtimeService) stopPod(ctx context.Context, id string) error {
	v, err := r.view(ctx)
	if err != nil {
		return err
	}
	// A pod being removed may have containers and no sandbox left.
	known := slices.Clone(v.sandboxes)
	for _, c := range v.containers {
		if !slices.Contains(known, c.PodUID) {
			known = append(known, c.PodUID)
		}
	}
	uid, err := unique("pod sandbox", id, known)
	if status.Code(err) == codes.NotFound {
		return nil // gone already
	}
	if err != nil {
		return err
	}
	sb := v.sandbox(uid)
	if err := r.cfg.Agent.StopPod(ctx, uid); err != nil {
		return status.Errorf(codes.Internal, "stop pod sandbox %s: %v", uid, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped == nil {
		r.stopped = map[string]*runtimeapi.PodSandbox{}
	}
	if len(r.stopped) < maxStopped {
		r.stopped[uid] = &runtimeapi.PodSandbox{Id: uid, Metadata: sb.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
			CreatedAt: sb.CreatedAt, Labels: sb.Labels, Annotations: sb.Annotations}
	}
	return nil
}

// StopContainer and RemoveContainer act on the container's pod: staticpodd
// runs a pod's containers as its manifest says, so a container stops only
// with its pod. The kubelet never calls them for pods it does not manage;
// kubeadm reset and crictl stop/rm do, and expect the container gone.
func (r *runtimeService) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := r.stopContainer(ctx, req.ContainerId); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *runtimeService) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := r.stopContainer(ctx, req.ContainerId); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtimeService) stopContainer(ctx context.Context, id string) error {
	v, err := r.view(ctx)
	if err != nil {
		return err
	}
	c, err := v.findContainer(id)
	if status.Code(err) == codes.NotFound {
		return nil // gone already: the CRI's calls are idempotent
	}
	if err != nil {
		return err
	}
	if err := r.cfg.Agent.StopPod(ctx, c.PodUID); err != nil {
		return status.Errorf(codes.Internal, "stop the pod of container %s: %v", c.ID, err)
	}
	return nil
}

// Bounds of ExecSync: what it keeps of each stream, and how long it runs
// when its caller gives no timeout.
const (
	// maxExecSyncOutput is what is kept of each of stdout and stderr: the
	// kubelet's exec probes keep 10 KiB, containerd 16 MiB (its
	// maxStreamSize); a reply must also fit maxSendMsgSize.
	maxExecSyncOutput = 4 << 20
	execSyncTimeout   = callTimeout
)

func (r *runtimeService) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.Cmd) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: no command")
	}
	id, err := r.runningContainer(ctx, req.ContainerId)
	if err != nil {
		return nil, err
	}
	timeout := execTimeout(req)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr boundedBuffer
	stdout.max, stderr.max = maxExecSyncOutput, maxExecSyncOutput
	code, err := r.cfg.Agent.Exec(ctx, id, podspec.ExecSpec{Cmd: req.Cmd, Stdout: &stdout, Stderr: &stderr, Timeout: timeout})
	switch {
	case err == nil:
	case errors.Is(err, podspec.ErrCommandNotFound):
		// The shell's 127, the error in stderr, as `staticpodd exec`
		// answers; containerd answers an error here (failed to exec in
		// container), docs/kubelet-differences.md.
		return &runtimeapi.ExecSyncResponse{Stdout: stdout.b, Stderr: append(stderr.b, err.Error()...), ExitCode: 127}, nil
	case errors.Is(err, podspec.ErrCommandNotExecutable):
		return &runtimeapi.ExecSyncResponse{Stdout: stdout.b, Stderr: append(stderr.b, err.Error()...), ExitCode: 126}, nil
	case ctx.Err() != nil:
		// The kubelet's exec prober reads DeadlineExceeded as a timeout.
		return nil, status.Errorf(codes.DeadlineExceeded, "command %q timed out after %s", req.Cmd[0], timeout)
	default:
		return nil, execError(err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.b, Stderr: stderr.b, ExitCode: int32(code)}, nil
}

// maxExecSyncTimeout bounds the timeout an ExecSync asks for.
const maxExecSyncTimeout = 24 * time.Hour

// execTimeout is how long an ExecSync runs: its timeout, at most a day, or
// execSyncTimeout without one.
func execTimeout(req *runtimeapi.ExecSyncRequest) time.Duration {
	if req.Timeout <= 0 {
		return execSyncTimeout
	}
	return time.Duration(min(req.Timeout, int64(maxExecSyncTimeout/time.Second))) * time.Second
}

func execError(err error) error {
	switch {
	case errors.Is(err, podspec.ErrNotExist):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, podspec.ErrNotRunning):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// runningContainer resolves id to a running container's full ID.
func (r *runtimeService) runningContainer(ctx context.Context, id string) (string, error) {
	v, err := r.view(ctx)
	if err != nil {
		return "", err
	}
	c, err := v.findContainer(id)
	if err != nil {
		return "", err
	}
	if c.State != podspec.StateRunning {
		return "", status.Errorf(codes.FailedPrecondition, "container %s is not running (%s)", c.ID, c.State)
	}
	return c.ID, nil
}

// boundedBuffer keeps the first max bytes written to it and drops the
// rest; the writes past max fail, which makes Exec drop the rest of the
// stream without blocking the process.
type boundedBuffer struct {
	b   []byte
	max int
}

var errOutputTooLong = errors.New("exec output exceeds its bound")

func (w *boundedBuffer) Write(p []byte) (int, error) {
	room := w.max - len(w.b)
	if room <= 0 {
		return 0, errOutputTooLong
	}
	if len(p) > room {
		w.b = append(w.b, p[:room]...)
		return room, errOutputTooLong
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// Exec returns the URL of the streaming server for the exec, as the kubelet
// and containerd do; the container must be running.
func (r *runtimeService) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.Cmd) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: no command")
	}
	id, err := r.runningContainer(ctx, req.ContainerId)
	if err != nil {
		return nil, err
	}
	req.ContainerId = id
	return r.streams.GetExec(req)
}

// fromManifests is the answer to the calls that would make or change a pod.
func (r *runtimeService) fromManifests(call string) error {
	dir := r.cfg.ManifestDir
	if dir == "" {
		dir = "the manifest directory (staticPodPath)"
	}
	return status.Errorf(codes.Unimplemented, "%s: staticpodd runs the pods of its manifests only; write or edit a manifest in %s", call, dir)
}

func (r *runtimeService) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	return nil, r.fromManifests("RunPodSandbox")
}

func (r *runtimeService) CreateContainer(context.Context, *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	return nil, r.fromManifests("CreateContainer")
}

func (r *runtimeService) StartContainer(context.Context, *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return nil, r.fromManifests("StartContainer")
}

func (r *runtimeService) UpdateContainerResources(context.Context, *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return nil, r.fromManifests("UpdateContainerResources")
}

func (r *runtimeService) UpdatePodSandboxResources(context.Context, *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return nil, r.fromManifests("UpdatePodSandboxResources")
}

func (r *runtimeService) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return nil, status.Error(codes.Unimplemented, "UpdateRuntimeConfig: staticpodd's pod network comes from its own configuration (podCIDR), not the kubelet's")
}

func (r *runtimeService) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, status.Error(codes.Unimplemented, "Attach: staticpodd's containers have no attachable stdin; read their logs, or exec into them")
}

func (r *runtimeService) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, status.Error(codes.Unimplemented, "PortForward: not served by staticpodd; static pods are reached on the node's or the pod's address")
}

func (r *runtimeService) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return nil, r.fromManifests("CheckpointContainer")
}

func (r *runtimeService) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) (*runtimeapi.CheckpointPodResponse, error) {
	return nil, r.fromManifests("CheckpointPod")
}

func (r *runtimeService) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, r.fromManifests("RestorePod")
}
