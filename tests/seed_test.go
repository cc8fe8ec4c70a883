package tests

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testnet"
)

// The seed notes the project started from: their kubelet config and Pod example
// must work as written, typos included (metadata.lables). The config points
// staticPodPath at one file, /tmp/test_pod.yaml, and binds nothing we can reach
// (readOnlyPort is off by default), so the pod is checked through the CLI socket.
const seedConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "192.168.0.8"
port: 20250
serializeImagePulls: false
evictionHard:
    memory.available:  "200Mi"
staticPodPath: "/tmp/test_pod.yaml"
`

const seedPod = `apiVersion: v1
kind: Pod
metadata:
  name: static-pod
  lables:
    app: nginx
spec:
  containers:
    - name: test-static
      image: nginx:latest
      ports:
        - containerPort: 81
          name: http-server
`

func TestSeedConfigAndPodRun(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	// nginx:latest: our busybox image tagged as nginx, serving /www with
	// httpd as its default command and stopping on SIGTERM as nginx does
	// (httpd as PID 1 would ignore it and wait out the 30s grace period),
	// pulled under the policy Always that :latest defaults to, from the test
	// registry standing in for Docker Hub.
	nginx := filepath.Join(d.Dir, "nginx.tar")
	buildImage(t, nginx, "-ref", "nginx:latest", "-cmd", "sh,-c,trap 'exit 0' TERM; httpd -f -p 81 -h /www & wait")
	testdaemon.Push(t, nginx, "nginx:latest")

	if err := os.WriteFile(d.Config, []byte(seedConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	podFile := "/tmp/test_pod.yaml"
	if err := os.WriteFile(podFile, []byte(seedPod), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(podFile) })
	d.SocketOnly = true
	d.Cgroup = "/staticpodd" // the seed config keeps the defaults
	d.Start()
	pod := d.WaitRunning("static-pod", 30*time.Second)
	waitTrapped(d, pod, "test-static") // else SIGTERM is lost and the stop takes the 30s grace period
	if pod.Labels["app"] != "" {
		t.Errorf("the misspelt lables became labels: %v", pod.Labels)
	}
	if pod.Spec.Containers[0].Image != "nginx:latest" {
		t.Errorf("image = %q", pod.Spec.Containers[0].Image)
	}
	// Without hostNetwork the pod is on the pod network: the host reaches
	// its port 81 at its pod IP, with no setup (the default network).
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !d.Net.Subnet.Contains(ip) {
		t.Fatalf("pod IP %q (%v), want one in the test network %s", pod.Status.PodIP, err, d.Net.Subnet)
	}
	testnet.GetUntil(t, "http://"+ip.String()+":81/")
	os.Remove(podFile)
	d.Eventually(30*time.Second, "the pod is gone with its file", func() error {
		if d.Pod("static-pod") != nil {
			return errStill
		}
		return nil
	})
}
