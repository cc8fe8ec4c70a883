package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// kubeadm reset's order under staticpodd-kubeadm's staticpodd-cri.socket:
// the daemon is stopped (its pod keeps running), then a CRI call on the
// socket systemd holds starts it (systemd-socket-activate stands in for
// systemd) and StopPodSandbox and RemovePodSandbox come at once, as the
// daemon starts (the agent's TestStopPodBeforeTheSources holds the call that
// comes before it has read its manifests). The pod found running is stopped
// and removed, its manifest still there; the daemon serves the passed socket.
func TestCRISocketActivatedReset(t *testing.T) {
	t.Parallel()
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate is not installed")
	}
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	uid := string(d.WaitRunning("web", 30*time.Second).UID)
	d.Stop()

	sock := filepath.Join(d.RunDir, "cri.sock")
	d.Wrap = []string{activate, "--listen=" + sock, "--fdname=cri"}
	// The CRI call is what starts the daemon: made before Start, which waits
	// for the started daemon's /healthz.
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for {
			if _, err := os.Stat(sock); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			stopped <- err
			return
		}
		defer conn.Close()
		c := runtimeapi.NewRuntimeServiceClient(conn)
		if _, err = c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: uid}); err == nil {
			_, err = c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: uid})
		}
		stopped <- err
	}()
	d.Start()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("StopPodSandbox, RemovePodSandbox on the activated socket: %v\n%s", err, d.OutputTail())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("StopPodSandbox on the activated socket did not return\n%s", d.OutputTail())
	}
	// kubeadm reset removes the manifests next.
	d.RemoveManifest("web.yaml")

	d.WaitLine(10*time.Second, `on="a socket systemd passed"`)
	c := criClient(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Containers) != 0 {
		t.Errorf("containers after reset's calls: %v", cs.Containers)
	}
	sbs, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs.Items) != 0 {
		t.Errorf("sandboxes after reset's calls: %v", sbs.Items)
	}
}
