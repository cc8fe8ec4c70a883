package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// benchNetwork measures what the pod network costs: manifest rename →
// container exec for a pod on the built-in default network (CNI ADD with
// Debian's bridge and host-local, and portmap when a hostPort is
// published) with and without a hostPort, against the same pod with
// hostNetwork, the three in turn, and the teardown of each (manifest
// removed → sandbox gone, CNI DEL included).
func benchNetwork(bin, image string, runs int) error {
	if bin == "" || image == "" {
		return fmt.Errorf("need -staticpodd and -image (make bench sets both)")
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		fmt.Printf("\npod network: NOT MEASURED, no CNI plugins (apt-get install -y containernetworking-plugins): %v\n", err)
		return nil
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sig := filepath.Join(dir, "sig")
	os.MkdirAll(sig, 0o755)
	fifo := filepath.Join(sig, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		return err
	}
	// No configuration: the built-in default network.
	d, err := startDaemon(bin, image, dir, "--cni-conf-dir", filepath.Join(dir, "net.d"))
	if err != nil {
		return err
	}
	defer d.stop()
	// side 0: hostNetwork; 1: pod network with a hostPort; 2: without.
	podManifest := func(name string, side int) string {
		port := ""
		if side == 1 {
			port = "    ports: [{containerPort: 81, hostPort: 18081}]\n"
		}
		return fifoPod(name, side == 0, sig, port)
	}
	manifest := func(name string, hostNetwork bool) string {
		if hostNetwork {
			return podManifest(name, 0)
		}
		return podManifest(name, 1)
	}
	sandboxes := filepath.Join(d.runDir, "pods")
	var start, stop [3][]time.Duration
	for i := 0; i < 3*(runs+1); i++ {
		side := i % 3
		name := fmt.Sprintf("net%d", i)
		tmp, dst := filepath.Join(dir, name+".yaml"), filepath.Join(d.manifests, "bench.yaml")
		if err := os.WriteFile(tmp, []byte(podManifest(name, side)), 0o644); err != nil {
			return err
		}
		t0 := time.Now()
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		t1, err := waitFIFO(fifo, 30*time.Second)
		if err != nil {
			return fmt.Errorf("run %d: %v\n%s", i, err, d.logs.String())
		}
		// The container has exited; the pod is done: remove it.
		if err := poll(30*time.Second, func() bool { return podPhase(d, name) == "Succeeded" }); err != nil {
			return fmt.Errorf("run %d: pod not done: %v", i, err)
		}
		t2 := time.Now()
		os.Remove(dst)
		if err := pollEvery(2*time.Millisecond, 30*time.Second, func() bool {
			e, _ := os.ReadDir(sandboxes)
			return len(e) == 0
		}); err != nil {
			return fmt.Errorf("run %d: sandbox not removed: %v", i, err)
		}
		t3 := time.Now()
		if i >= 3 { // the first of each side warms caches
			start[side] = append(start[side], t1.Sub(t0))
			stop[side] = append(stop[side], t3.Sub(t2))
		}
		if err := poll(30*time.Second, func() bool { n, _ := d.countPods(); return n == 0 }); err != nil {
			return fmt.Errorf("run %d: pod still listed: %v", i, err)
		}
	}
	fmt.Printf("\npod network: manifest rename → container exec, and manifest removed → sandbox gone, %d runs each, alternating\n\n", runs)
	fmt.Printf("| | start p50 | start p90 | teardown p50 | teardown p90 |\n|---|---|---|---|---|\n")
	for side, label := range []string{"hostNetwork", "default network (CNI bridge, hostPort: portmap)", "default network (CNI bridge, no hostPort)"} {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", label, ms(pct(start[side], 50)), ms(pct(start[side], 90)), ms(pct(stop[side], 50)), ms(pct(stop[side], 90)))
	}
	for side, label := range []string{1: "with hostPort", 2: "without hostPort"} {
		if side == 0 {
			continue
		}
		fmt.Printf("| ratio CNI %s / hostNetwork | %.2f | %.2f | %.2f | %.2f |\n", label,
			ratio(start, side, 50), ratio(start, side, 90), ratio(stop, side, 50), ratio(stop, side, 90))
	}
	if _, err := exec.LookPath("podman"); err != nil {
		fmt.Printf("\npodman: not installed, not compared (%v)\n", err)
		return nil
	}
	pstart, pstop, err := benchPodman(image, dir, fifo, min(runs, 10), func(name string, hostNetwork bool) string {
		return strings.Replace(manifest(name, hostNetwork), "image: busybox", "image: "+podmanImage, 1)
	})
	if err != nil {
		return fmt.Errorf("podman: %w", err)
	}
	fmt.Printf("\npodman kube play (CLI start → container exec) and podman kube down (CLI start → exit) of the same pods, %d runs each, alternating\n\n", min(runs, 10))
	fmt.Printf("| | start p50 | start p90 | teardown p50 | teardown p90 |\n|---|---|---|---|---|\n")
	for side, label := range []string{"podman, hostNetwork", "podman, its default network (netavark bridge, hostPort)"} {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", label, ms(pct(pstart[side], 50)), ms(pct(pstart[side], 90)), ms(pct(pstop[side], 50)), ms(pct(pstop[side], 90)))
	}
	fmt.Printf("| ratio staticpodd / podman, pod network | %.2f | %.2f | %.2f | %.2f |\n",
		float64(pct(start[1], 50))/float64(pct(pstart[1], 50)), float64(pct(start[1], 90))/float64(pct(pstart[1], 90)),
		float64(pct(stop[1], 50))/float64(pct(pstop[1], 50)), float64(pct(stop[1], 90))/float64(pct(pstop[1], 90)))
	return nil
}

// podmanImage is the benchmark's busybox image in podman's store: a name of
// localhost, so that podman never looks for it on a registry.
const podmanImage = "localhost/staticpodd-bench-busybox:latest"

// benchPodman times `podman kube play` (to the container's exec) and
// `podman kube down` of the manifests manifest makes, alternating
// hostNetwork and not. On a cgroup v1 host podman needs runc as its runtime
// and default ulimits within the hard nofile limit (containers.conf).
func benchPodman(image, dir, fifo string, runs int, manifest func(string, bool) string) (start, stop [2][]time.Duration, err error) {
	if exec.Command("podman", "image", "exists", podmanImage).Run() != nil {
		out, err := exec.Command("podman", "load", "-i", image).CombinedOutput()
		if err != nil {
			return start, stop, fmt.Errorf("load %s: %v: %s", image, err, out)
		}
		loaded := ""
		for _, l := range strings.Split(string(out), "\n") {
			if r, ok := strings.CutPrefix(l, "Loaded image: "); ok {
				loaded = strings.TrimSpace(r)
			}
		}
		if out, err := exec.Command("podman", "tag", loaded, podmanImage).CombinedOutput(); err != nil {
			return start, stop, fmt.Errorf("tag %s: %v: %s", loaded, err, out)
		}
	}
	for i := 0; i < 2*(runs+1); i++ {
		side := i % 2
		name := fmt.Sprintf("podman%d", i)
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, []byte(manifest(name, side == 0)), 0o644); err != nil {
			return start, stop, err
		}
		t0 := time.Now()
		play := exec.Command("podman", "kube", "play", file)
		if err := play.Start(); err != nil {
			return start, stop, err
		}
		t1, err := waitFIFO(fifo, 60*time.Second)
		if werr := play.Wait(); err == nil && werr != nil {
			err = fmt.Errorf("kube play: %w", werr)
		}
		if err != nil {
			return start, stop, fmt.Errorf("run %d: %w", i, err)
		}
		t2 := time.Now()
		if out, err := exec.Command("podman", "kube", "down", file).CombinedOutput(); err != nil {
			return start, stop, fmt.Errorf("run %d: kube down: %v: %s", i, err, out)
		}
		t3 := time.Now()
		if i >= 2 {
			start[side] = append(start[side], t1.Sub(t0))
			stop[side] = append(stop[side], t3.Sub(t2))
		}
	}
	return start, stop, nil
}

// ratio is side's percentile p over hostNetwork's (side 0).
func ratio(ds [3][]time.Duration, side, p int) float64 {
	return float64(pct(ds[side], p)) / float64(pct(ds[0], p))
}

// podPhase is the phase of the daemon's pod named name ("" if none).
func podPhase(d *benchDaemon, name string) string {
	resp, err := http.Get(d.podsURL)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return ""
	}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, name+"-") {
			return string(p.Status.Phase)
		}
	}
	return ""
}
