package tests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criClient connects to the daemon's CRI socket as the kubelet's and
// crictl's client does (k8s.io/cri-client: 16 MiB messages).
func criClient(t *testing.T, d *daemon) runtimeapi.RuntimeServiceClient {
	t.Helper()
	sock := filepath.Join(d.RunDir, "cri.sock")
	d.Eventually(10*time.Second, "the CRI socket is there", func() error {
		_, err := os.Stat(sock)
		return err
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// TestCRI drives a daemon's CRI socket as kubeadm and crictl do: version
// and status, the pod's sandbox and container as the kubelet names them,
// exec (sync, flooded, streamed with a terminal), hostile clients, and
// kubeadm reset's StopPodSandbox and RemovePodSandbox, after which nothing
// of the pod is left until its manifest makes it again.
func TestCRI(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	pod := d.WaitRunning("web", 30*time.Second)
	c := criClient(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	fi, err := os.Stat(filepath.Join(d.RunDir, "cri.sock"))
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("cri.sock: %v, %v; want a socket, mode 0600", fi.Mode(), err)
	}
	v, err := c.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "staticpodd" || v.RuntimeApiVersion != "v1" || v.RuntimeVersion == "" {
		t.Errorf("Version = %v", v)
	}
	st, err := c.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil || len(st.Status.Conditions) != 2 || !st.Status.Conditions[0].Status || !st.Status.Conditions[1].Status {
		t.Errorf("Status = %v, %v; want RuntimeReady and NetworkReady", st, err)
	}

	sbs, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs.Items) != 1 {
		t.Fatalf("sandboxes %v, want the pod's", sbs.Items)
	}
	sb := sbs.Items[0]
	if sb.Id != string(pod.UID) || sb.Metadata.Name != pod.Name || sb.Metadata.Namespace != "default" ||
		sb.Metadata.Uid != string(pod.UID) || sb.Labels["io.kubernetes.pod.name"] != pod.Name ||
		sb.Annotations["kubernetes.io/config.hash"] != string(pod.UID) {
		t.Errorf("sandbox %v, want the pod %s/%s %s as the kubelet names it", sb, pod.Namespace, pod.Name, pod.UID)
	}
	pst, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
	if err != nil || pst.Status.Network.Ip != pod.Status.PodIP {
		t.Errorf("sandbox status %v, %v; want the pod's IP %s", pst, err, pod.Status.PodIP)
	}
	cs, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.Id}})
	if err != nil || len(cs.Containers) != 1 {
		t.Fatalf("containers %v, %v; want main", cs, err)
	}
	ctr := cs.Containers[0]
	wantID := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "staticpodd://")
	if ctr.Id != wantID || ctr.Metadata.Name != "main" || ctr.State != runtimeapi.ContainerState_CONTAINER_RUNNING ||
		ctr.Labels["io.kubernetes.container.name"] != "main" || ctr.Annotations["io.kubernetes.container.restartCount"] != "0" {
		t.Errorf("container %v, want main, %s, running", ctr, wantID)
	}
	cst, err := c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.Id[:12], Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cst.Status.LogPath); err != nil || !strings.HasPrefix(cst.Status.LogPath, d.LogsDir) {
		t.Errorf("log path %q: %v", cst.Status.LogPath, err)
	}
	if !strings.Contains(cst.Info["info"], `"sandboxID":"`+sb.Id+`"`) {
		t.Errorf("verbose info %q", cst.Info["info"])
	}
	if s, err := c.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: ctr.Id}); err != nil || s.Stats.Memory.WorkingSetBytes.GetValue() == 0 {
		t.Errorf("container stats %v, %v", s, err)
	}

	ex, err := c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.Id, Cmd: []string{"sh", "-c", "echo $HOSTNAME; echo oops >&2; exit 4"}, Timeout: 10})
	if err != nil || string(ex.Stdout) != pod.Name+"\n" || string(ex.Stderr) != "oops\n" || ex.ExitCode != 4 {
		t.Errorf("ExecSync = %v, %v", ex, err)
	}
	// A flood is cut at the bound, and the call answers.
	ex, err = c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.Id, Cmd: []string{"sh", "-c", "yes | head -c 67108864"}, Timeout: 30})
	if err != nil || len(ex.Stdout) != 4<<20 {
		t.Errorf("ExecSync of 64 MiB: %d bytes kept, %v; want 4 MiB", len(ex.GetStdout()), err)
	}
	begin := time.Now()
	if _, err := c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.Id, Cmd: []string{"sleep", "60"}, Timeout: 1}); status.Code(err) != codes.DeadlineExceeded || time.Since(begin) > 20*time.Second {
		t.Errorf("ExecSync past its timeout: %v after %s", err, time.Since(begin))
	}
	if _, err := c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.Id, Cmd: []string{"echo", strings.Repeat("x", 2<<20)}}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an oversized request: %v, want ResourceExhausted", err)
	}
	if _, err := c.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{}); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), d.Manifests) {
		t.Errorf("RunPodSandbox: %v, want Unimplemented naming %s", err, d.Manifests)
	}

	// A client that connects and says nothing, and one that holds an exec
	// stream, while crictl exec -it runs.
	idle, err := net.Dial("unix", filepath.Join(d.RunDir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	held, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctr.Id, Cmd: []string{"sleep", "3600"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	holdCtx, stopHolding := context.WithCancel(ctx)
	defer stopHolding()
	go criStream(holdCtx, held.Url, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
	resp, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctr.Id, Cmd: []string{"sh", "-c", `read x; while [ "$(stty size)" = "0 0" ]; do sleep 0.1; done; stty size; echo got $x; exit 5`},
		Tty: true, Stdin: true, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = criStream(ctx, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &out, Tty: true,
		TerminalSizeQueue: &oneSize{size: &remotecommand.TerminalSize{Width: 101, Height: 33}}})
	var exit interface{ ExitStatus() int }
	if !errors.As(err, &exit) || exit.ExitStatus() != 5 {
		t.Errorf("exec -it ended with %v, want exit code 5", err)
	}
	if got := strings.ReplaceAll(out.String(), "\r", ""); !strings.Contains(got, "33 101\ngot hello\n") {
		t.Errorf("exec -it output %q, want the terminal's size and the input back", got)
	}
	stopHolding()

	// kubeadm reset: every sandbox stopped, then removed. Nothing of the
	// pod is left: containers, sandbox, cgroups, mounts, network
	// namespace, veth, lease, state.
	if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(got.Items) != 1 ||
		got.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandboxes after StopPodSandbox: %v, %v; want the pod's, NOTREADY", got, err)
	}
	if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(got.Items) != 0 {
		t.Errorf("sandboxes after RemovePodSandbox: %v, %v", got, err)
	}
	if got, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || len(got.Containers) != 0 {
		t.Errorf("containers after RemovePodSandbox: %v, %v", got, err)
	}
	d.AssertNoLeaks()
	if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
		t.Errorf("RemovePodSandbox of a removed sandbox: %v, want success", err)
	}

	// Its manifest is still there: the pod comes back, as a new run.
	again := d.WaitRunning("web", time.Minute)
	if again.Status.ContainerStatuses[0].ContainerID == pod.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("the pod runs its old container again")
	}
	// kubeadm reset's order: every sandbox stopped and removed, then the
	// manifests, within the hold: the pod is not made again, and once the
	// agent has let it go nothing can make it.
	got, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("sandboxes %v, %v; want the pod's", got, err)
	}
	if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: got.Items[0].Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: got.Items[0].Id}); err != nil {
		t.Fatal(err)
	}
	d.RemoveManifest("web.yaml")
	d.Eventually(time.Minute, "the agent lets the pod go", func() error {
		if p := d.Pod("web"); p != nil {
			return errors.New("the pod is still listed")
		}
		return nil
	})
	if got, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(got.Items) != 0 {
		t.Errorf("sandboxes after reset: %v, %v", got, err)
	}
	d.AssertNoLeaks()
}

// criStream runs the exec at u, the URL Exec returned, as crictl does.
func criStream(ctx context.Context, u string, opts remotecommand.StreamOptions) error {
	parsed, err := url.Parse(u)
	if err != nil {
		return err
	}
	e, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", parsed)
	if err != nil {
		return err
	}
	return e.StreamWithContext(ctx, opts)
}

// oneSize is a terminal that has one size.
type oneSize struct{ size *remotecommand.TerminalSize }

func (q *oneSize) Next() *remotecommand.TerminalSize {
	s := q.size
	q.size = nil
	return s
}

// A pod whose manifest was removed is stopping with its own 60 s grace
// period, its container ignoring SIGTERM; kubeadm reset's StopPodSandbox
// then cuts it short: the container is killed within the CRI's stop (1 s,
// 2 s with the minimum) and the call returns with nothing of the pod left,
// not a minute later.
func TestCRIStopCutsAStopUnderWay(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("stubborn.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: stubborn
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 1 & wait $!; done"]
`)
	pod := d.WaitRunning("stubborn", 30*time.Second)
	c := criClient(t, d)
	d.RemoveManifest("stubborn.yaml")
	d.WaitLine(30*time.Second, "stopping container", "grace=1m0s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: string(pod.UID)}); err != nil {
		t.Fatalf("StopPodSandbox during the pod's 60 s stop: %v", err)
	}
	took := time.Since(began)
	t.Logf("StopPodSandbox took %v", took)
	// The cut's 2 s, and the removal; a minute would mean no cut.
	if took > 20*time.Second {
		t.Errorf("StopPodSandbox took %v, want the stop cut to the CRI's", took)
	}
	d.WaitLine(5*time.Second, "stopping the pod's containers sooner", "reason=StoppedByRuntime")
	d.WaitLine(5*time.Second, "container outlived its stop signal, killing it")
	if got, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || len(got.Containers) != 0 {
		t.Errorf("containers after StopPodSandbox: %v, %v", got, err)
	}
	d.Eventually(time.Minute, "the agent lets the pod go", func() error {
		if p := d.Pod("stubborn"); p != nil {
			return errors.New("the pod is still listed")
		}
		return nil
	})
	d.AssertNoLeaks()
}
