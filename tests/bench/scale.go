package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The scale benchmark (BENCH_PODS, -pods): n hostNetwork busybox pods whose
// process writes its own file into a shared host directory once it runs,
// then waits for SIGTERM. Each figure is printed beside its reference
// measured in the same run where one runs on this machine: n containers of
// an equivalent bundle under Debian's runc CLI.
//
//   - burst: all n manifests renamed into the watched directory at once →
//     every container's file there; runc: n `runc run -d` started at once.
//   - memory with n running: the daemon's RSS and anonymous memory, and
//     each monitor's PSS (its fair share of pages shared with the others).
//   - idle CPU of the daemon and all monitors with n running.
//   - kill -9 of the daemon → a new daemon lists all n Running, with the same
//     container IDs and no restart.
//   - teardown: every manifest removed → no pod listed, no container state,
//     no cgroup and no mount of theirs left; runc: n `runc kill TERM` and
//     `runc delete` at once.
//
// The two sides of burst and teardown alternate which goes first over the
// rounds.

// scaleCommand is each container's command: its file in /sig once it runs,
// then an exit on SIGTERM (sh is PID 1 of its namespace: without the trap
// it would ignore the signal).
const scaleCommand = `trap "exit 0" TERM; : > /sig/$NAME; sleep 3600 & wait`

// restAfter is how long after the burst the daemon counts as at rest.
const restAfter = 25 * time.Second

type scaleResult struct {
	pods                    int
	burst, runcBurst        []time.Duration
	burstFirst              []time.Duration // to the first container's file
	burstDaemonCPU          []time.Duration // the daemon and its monitors, during the burst
	burstPodsCPU            []time.Duration // the pods' cgroups (inits, containers), during the burst
	teardown, runcTeardown  []time.Duration
	adopt                   []time.Duration
	daemon, daemonBurst     procMem // at rest, and 2 s after the burst
	monitorPSS              []int64 // bytes, each monitor of a running container
	spare                   int64   // PSS of the spare monitor, if any
	idleCPU, idleMonitorCPU []float64
	idleWindow              time.Duration
}

func benchScale(bin, image, runc, busybox string, pods, rounds int, idleWindow time.Duration) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res := scaleResult{pods: pods, idleWindow: idleWindow}
	for r := range rounds {
		sides := []func() error{
			func() error { return scaleOurs(bin, image, dir, r, &res) },
			func() error { return scaleRunc(runc, busybox, dir, r, &res) },
		}
		if r%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
	}
	res.print()
	return nil
}

func (r *scaleResult) print() {
	fmt.Printf("\n%d pods (BENCH_PODS), %d rounds, the sides alternating which goes first; min–max over the rounds\n\n", r.pods, len(r.burst))
	fmt.Printf("| figure | staticpodd | reference | ratio (median) |\n|---|---|---|---|\n")
	row := func(name string, ours, ref []time.Duration, refName string) {
		if len(ref) == 0 {
			fmt.Printf("| %s | %s | %s | |\n", name, spread(ours), refName)
			return
		}
		fmt.Printf("| %s | %s | %s: %s | %.2f |\n", name, spread(ours), refName, spread(ref),
			float64(median(ours))/float64(median(ref)))
	}
	how := "at once"
	if peer.runcLoop {
		how = "one after the other"
	}
	row("all manifests dropped at once → every container running", r.burst, r.runcBurst, fmt.Sprintf("%d × runc run -d %s", r.pods, how))
	// The per-pod cost is what shows a curve: flat from 10 to 1000 pods
	// when nothing the daemon does per pod grows with the pods it has.
	perPod := func(ds []time.Duration) []time.Duration {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = d / time.Duration(r.pods)
		}
		return out
	}
	row("· per pod (the burst ÷ the pods)", perPod(r.burst), perPod(r.runcBurst), "runc, per pod")
	row("· of which to the first container running", r.burstFirst, nil, "—")
	row("· CPU of the burst per pod: the daemon and its monitors", perPod(r.burstDaemonCPU), nil, "—")
	row("· CPU of the burst per pod: the pods' cgroups (libcontainer's inits, the containers)", perPod(r.burstPodsCPU), nil, "—")
	row("kill -9 of the daemon → all adopted, Running, no restart", r.adopt, nil, "—")
	row("all manifests removed → nothing left (state, cgroups, mounts)", r.teardown, r.runcTeardown, fmt.Sprintf("%d × runc kill TERM + delete %s", r.pods, how))
	var sum int64
	for _, p := range r.monitorPSS {
		sum += p
	}
	per := int64(0)
	if len(r.monitorPSS) > 0 {
		per = sum / int64(len(r.monitorPSS))
	}
	fmt.Printf("| daemon RSS with %d running, at rest (of which anon) | %s (%s) | kubelet + containerd with 10: 147 MiB (issue 11) | |\n", r.pods, mib(r.daemon.rss), mib(r.daemon.anon))
	fmt.Printf("| · 2 s after the burst | %s (%s) | — | |\n", mib(r.daemonBurst.rss), mib(r.daemonBurst.anon))
	fmt.Printf("| memory outside the container per running container: monitor PSS, mean of %d | %s (+ one spare monitor: %s) | containerd shim + pause ≈ 5.3 MiB (issue 11) | |\n", len(r.monitorPSS), mib(per), mib(r.spare))
	fmt.Printf("| idle CPU with %d running, over %s: daemon / all monitors | %s / %s of a core | kubelet + containerd ≈ 3%% with 10 (issue 11) | |\n",
		r.pods, r.idleWindow, pcts(r.idleCPU), pcts(r.idleMonitorCPU))
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	lo, hi := slices.Min(ds), slices.Max(ds)
	if len(ds) == 1 {
		return ms(lo)
	}
	return ms(lo) + "–" + ms(hi)
}

func median(ds []time.Duration) time.Duration { return pct(ds, 50) }

func pcts(fs []float64) string {
	if len(fs) == 0 {
		return "—"
	}
	lo, hi := slices.Min(fs), slices.Max(fs)
	if len(fs) == 1 || lo == hi {
		return fmt.Sprintf("%.3f%%", lo)
	}
	return fmt.Sprintf("%.3f–%.3f%%", lo, hi)
}

// scaleManifest is pod i of the scale benchmark.
func scaleManifest(i int, sig string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: scale%03d}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  volumes: [{name: sig, hostPath: {path: %s}}]
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    env: [{name: NAME, value: scale%03d}]
    command: ["sh", "-c", %q]
    volumeMounts: [{name: sig, mountPath: /sig}]
`, i, sig, i, scaleCommand)
}

// firstFile is the modification time of the oldest file in dir.
func firstFile(dir string) time.Time {
	var first time.Time
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if fi, err := e.Info(); err == nil && (first.IsZero() || fi.ModTime().Before(first)) {
			first = fi.ModTime()
		}
	}
	return first
}

// waitFiles waits until dir holds n entries: every container has run.
func waitFiles(dir string, n int, timeout time.Duration) error {
	return pollEvery(5*time.Millisecond, timeout, func() bool {
		es, _ := os.ReadDir(dir)
		return len(es) >= n
	})
}

func scaleOurs(bin, image, dir string, round int, res *scaleResult) error {
	sub := filepath.Join(dir, fmt.Sprintf("ours%d", round))
	sig := filepath.Join(sub, "sig")
	staged := filepath.Join(sub, "staged")
	for _, p := range []string{sig, staged} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	d, err := startDaemon(bin, image, sub)
	if err != nil {
		return err
	}
	acct, err := newBurstCPU(d.cmd.Process.Pid)
	if err != nil {
		d.stop()
		return fmt.Errorf("count the burst's CPU: %v", err)
	}
	defer acct.remove() // once the daemon and its monitors are gone
	defer d.stop()
	defer d.removePods()
	for i := range res.pods {
		if err := os.WriteFile(filepath.Join(staged, fmt.Sprintf("scale%03d.yaml", i)), []byte(scaleManifest(i, sig)), 0o644); err != nil {
			return err
		}
	}

	daemon0, pods0 := acct.usage()
	// Burst.
	t0 := time.Now()
	for i := range res.pods {
		name := fmt.Sprintf("scale%03d.yaml", i)
		if err := os.Rename(filepath.Join(staged, name), filepath.Join(d.manifests, name)); err != nil {
			return err
		}
	}
	if err := waitFiles(sig, res.pods, 5*time.Minute); err != nil {
		return fmt.Errorf("burst of %d pods: %v\n%s", res.pods, err, d.logs.String())
	}
	res.burst = append(res.burst, time.Since(t0))
	tracePhase("burst", res.pods, t0, time.Now())
	daemon1, pods1 := acct.usage()
	res.burstDaemonCPU = append(res.burstDaemonCPU, daemon1-daemon0)
	res.burstPodsCPU = append(res.burstPodsCPU, pods1-pods0)
	res.burstFirst = append(res.burstFirst, firstFile(sig).Sub(t0))
	// The status says Running a moment after the process ran.
	var before map[string]string
	if err := pollEvery(5*time.Millisecond, time.Minute, func() bool {
		before, err = d.running(res.pods)
		return err == nil
	}); err != nil {
		return fmt.Errorf("burst: %v", err)
	}

	// Memory and idle CPU, in the first round only: they do not vary
	// with the order of the sides.
	if round == 0 {
		time.Sleep(2 * time.Second) // the start-up's garbage collected, the spare settled
		res.daemonBurst = memOf(d.cmd.Process.Pid)
		// At rest: once the daemon has been quiet long enough to give back
		// what the burst touched (10 s without a pod event, agent/trim's
		// trimQuiet), and its periodic work (housekeeping every 10 s, the
		// relist every 20 s) has run since.
		time.Sleep(restAfter)
		ms := monitorPids(d.runDir)
		for _, pid := range ms {
			p := pssOf(pid)
			if isSpare(pid) {
				res.spare = p
				continue
			}
			res.monitorPSS = append(res.monitorPSS, p)
		}
		dcpu0, mcpu0 := cpuTime(d.cmd.Process.Pid), sumCPU(ms)
		time.Sleep(res.idleWindow)
		dcpu, mcpu := cpuTime(d.cmd.Process.Pid)-dcpu0, sumCPU(ms)-mcpu0
		res.idleCPU = append(res.idleCPU, 100*float64(dcpu)/float64(res.idleWindow))
		res.idleMonitorCPU = append(res.idleMonitorCPU, 100*float64(mcpu)/float64(res.idleWindow))
		res.daemon = memOf(d.cmd.Process.Pid)
	}

	// kill -9 and adoption.
	d.cmd.Process.Kill()
	d.cmd.Wait()
	t0 = time.Now()
	if err := d.restart(); err != nil {
		return err
	}
	if err := pollEvery(5*time.Millisecond, time.Minute, func() bool {
		after, err := d.running(res.pods)
		return err == nil && maps2Equal(before, after)
	}); err != nil {
		after, aerr := d.running(res.pods)
		return fmt.Errorf("adoption: %v (%v; %d of %d pods as before)\n%s", err, aerr, countSame(before, after), len(before), d.logs.String())
	}
	res.adopt = append(res.adopt, time.Since(t0))
	tracePhase("adoption", res.pods, t0, time.Now())

	// Teardown: every manifest removed → nothing of them left.
	t0 = time.Now()
	entries, _ := os.ReadDir(d.manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(d.manifests, e.Name()))
	}
	if err := pollEvery(5*time.Millisecond, 2*time.Minute, func() bool { return d.nothingLeft() == "" }); err != nil {
		return fmt.Errorf("teardown: %v: %s", err, d.nothingLeft())
	}
	res.teardown = append(res.teardown, time.Since(t0))
	tracePhase("removal", res.pods, t0, time.Now())
	return nil
}

// running returns the container ID and restart count of every pod's
// container, by pod name, once n pods are listed Running.
func (d *benchDaemon) running(n int) (map[string]string, error) {
	resp, err := http.Get(d.podsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				Phase             string
				ContainerStatuses []struct {
					ContainerID  string
					RestartCount int
					State        struct{ Running *struct{} }
				}
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.Status.Phase != "Running" || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		cs := p.Status.ContainerStatuses[0]
		out[p.Metadata.Name] = fmt.Sprintf("%s restarts=%d", cs.ContainerID, cs.RestartCount)
	}
	if len(out) != n {
		return out, fmt.Errorf("%d of %d pods running", len(out), n)
	}
	return out, nil
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func countSame(a, b map[string]string) int {
	n := 0
	for k, v := range a {
		if b[k] == v {
			n++
		}
	}
	return n
}

// nothingLeft says what is left of the daemon's pods ("" for nothing): a
// listed pod, a container or pod record, a pod cgroup, a mount.
func (d *benchDaemon) nothingLeft() string {
	// The daemon's pod list last: asked every 5 ms while hundreds of pods
	// are listed, it was 7% of the daemon's CPU in a 300-pod removal, a
	// load the runc side does not carry. The run dir, cgroups and mounts
	// are the benchmark's own reads.
	for _, sub := range []string{"containers", "pods"} {
		if es, _ := os.ReadDir(filepath.Join(d.runDir, sub)); len(es) > 0 {
			return fmt.Sprintf("%d entries in %s", len(es), filepath.Join(d.runDir, sub))
		}
	}
	// The pods' cgroups under the daemon's cgroup root: in every v1
	// hierarchy, in the v2 tree, and as systemd's slices (oci's
	// podCgroupsPath: staticpodd-bench-kubepods-pod<uid>.slice, whose
	// parents systemd keeps).
	var cgs []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/staticpodd-bench/*/", "/sys/fs/cgroup/staticpodd-bench/*/", "/sys/fs/cgroup/staticpodd.slice/staticpodd-bench.slice/staticpodd-bench-kubepods.slice/*/"} {
		m, _ := filepath.Glob(pattern)
		cgs = append(cgs, m...)
	}
	for _, cg := range cgs {
		if fi, err := os.Stat(cg); err == nil && fi.IsDir() {
			return "cgroup " + cg
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (strings.HasPrefix(fields[4], d.runDir+"/") || strings.HasPrefix(fields[4], d.rootDir+"/")) {
			return "mount " + fields[4]
		}
	}
	if n, err := d.countPods(); err != nil || n != 0 {
		return fmt.Sprintf("%d pods listed (%v)", n, err)
	}
	return ""
}

// restart starts the daemon again on the same dirs, as systemd would after
// a crash.
func (d *benchDaemon) restart() error {
	d.logs.Reset()
	d.cmd = exec.Command(d.cmd.Path, d.cmd.Args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	return d.cmd.Start()
}

// monitorPids are the pids of the monitors of the daemon whose run dir is
// runDir, the spare included.
func monitorPids(runDir string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("staticpodd-monitor\x00")) || !bytes.Contains(b, []byte(runDir+"/")) {
			continue
		}
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		pids = append(pids, pid)
	}
	return pids
}

// isSpare reports whether monitor pid runs no container yet: it has no
// child.
func isSpare(pid int) bool {
	// Each thread lists the children it forked: look at all of them.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return false
		}
	}
	return len(tasks) > 0
}

// pssOf is pid's proportional set size in bytes (smaps_rollup).
func pssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func sumCPU(pids []int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		t += cpuTime(p)
	}
	return t
}

// scaleRunc is the reference: the same containers under the runc CLI.
func scaleRunc(runc, busybox, dir string, round int, res *scaleResult) error {
	sub := filepath.Join(dir, fmt.Sprintf("runc%d", round))
	sig := filepath.Join(sub, "sig")
	if err := os.MkdirAll(sig, 0o755); err != nil {
		return err
	}
	state := filepath.Join("/run", filepath.Base(dir)+fmt.Sprintf("-runc%d", round))
	defer os.RemoveAll(state)
	bundles := make([]string, res.pods)
	for i := range res.pods {
		b, err := makeBundle(runc, busybox, sub, fmt.Sprintf("b%03d", i), []string{"sh", "-c", scaleCommand}, sig)
		if err != nil {
			return err
		}
		if err := setEnv(b, fmt.Sprintf("NAME=scale%03d", i)); err != nil {
			return err
		}
		bundles[i] = b
	}
	id := func(i int) string { return fmt.Sprintf("scale%d-%03d", round, i) }
	defer func() {
		for i := range res.pods {
			runcCommand(runc, "--root", state, "delete", "-f", id(i)).Run()
		}
	}()
	all := func(f func(i int) error) error {
		if peer.runcLoop {
			for i := range res.pods {
				if err := f(i); err != nil {
					return err
				}
			}
			return nil
		}
		errs := make([]error, res.pods)
		var wg sync.WaitGroup
		for i := range res.pods {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	t0 := time.Now()
	if err := all(func(i int) error {
		// Its errors to a file, not a pipe: the detached container would
		// hold a pipe open, and the wait for its end would never end.
		errFile, err := os.Create(bundles[i] + ".err")
		if err != nil {
			return err
		}
		defer errFile.Close()
		cmd := runcCommand(runc, "--root", state, "run", "-d", "--bundle", bundles[i], id(i))
		cmd.Stderr = errFile
		if err := cmd.Run(); err != nil {
			out, _ := os.ReadFile(errFile.Name())
			return fmt.Errorf("runc run %s: %v: %s", id(i), err, out)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := waitFiles(sig, res.pods, 5*time.Minute); err != nil {
		return fmt.Errorf("runc burst: %v", err)
	}
	res.runcBurst = append(res.runcBurst, time.Since(t0))

	t0 = time.Now()
	if err := all(func(i int) error {
		if out, err := runcCommand(runc, "--root", state, "kill", id(i), "TERM").CombinedOutput(); err != nil {
			return fmt.Errorf("runc kill %s: %v: %s", id(i), err, out)
		}
		// delete refuses a container still running: try until it has exited.
		return pollEvery(5*time.Millisecond, time.Minute, func() bool {
			return runcCommand(runc, "--root", state, "delete", id(i)).Run() == nil
		})
	}); err != nil {
		return err
	}
	res.runcTeardown = append(res.runcTeardown, time.Since(t0))
	return nil
}

// setEnv adds kv to the environment of the bundle's process.
func setEnv(bundle, kv string) error {
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	proc := spec["process"].(map[string]any)
	env, _ := proc["env"].([]any)
	proc["env"] = append(env, kv)
	raw, err = json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}
