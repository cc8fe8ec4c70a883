//go:build linux

// Command bench measures how long staticpodd takes to bring up kubeadm's
// control plane, from its own start: when each of etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler exec'd, when the API server's
// /readyz answered ok, when each mirror pod was visible on it, and when all
// four were Ready there (as kubectl shows them) and in staticpodd; then the
// resident memory of staticpodd and its monitors. Each run is cold: a new
// network namespace, new certificates, an empty etcd, a new staticpodd state;
// only the images are imported before the clock starts, as a kubelet's would
// be pulled. It prints each run and the median of all. RSS counts the pages
// of the staticpodd binary that the daemon and each monitor share once per
// process, as a sum of RSS does for any set of processes; PSS divides them.
//
//	go run ./tests/controlplane/bench -runs 3      (make bench-controlplane)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
)

func main() {
	runs := flag.Int("runs", 3, "cold runs")
	bin := flag.String("staticpodd", os.Getenv("STATICPODD_BIN"), "staticpodd binary")
	mirrors := flag.Bool("mirrors", true, "give staticpodd kubeadm's kubelet.conf, and wait for the mirror pods")
	flag.DurationVar(&rest, "rest", time.Minute, "how long after all is Ready the daemon's memory at rest is read (0: not read)")
	flag.Parse()
	if err := run(*runs, *bin, *mirrors); err != nil {
		fmt.Fprintln(os.Stderr, "bench-controlplane:", err)
		os.Exit(1)
	}
}

// rest is how long after all is Ready the daemon is taken to be at rest.
var rest time.Duration

// result is one run's times from staticpodd's start, and its memory.
type result struct {
	exec       map[string]time.Duration // by component
	allExec    time.Duration
	readyz     time.Duration
	mirror     map[string]time.Duration
	allMirrors time.Duration
	allReady   time.Duration // the four mirror pods Ready on the API server
	localReady time.Duration // the four pods Ready in staticpodd
	rss        int64         // staticpodd and its monitors, bytes
	pss        int64         // the same, each shared page divided among its sharers
	daemonRSS  int64
	monitors   int
	// The daemon's alone, rest after all was Ready: RSS, and of it the
	// anonymous pages and the file's (the binary's code and data).
	restRSS, restAnon, restFile int64
}

func run(runs int, bin string, mirrors bool) error {
	if bin == "" {
		return errors.New("no staticpodd binary: -staticpodd or STATICPODD_BIN")
	}
	cpBin, err := cluster.BinDir()
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	tars, err := cluster.Images(root, cpBin)
	if err != nil {
		return err
	}
	var results []result
	for i := range runs {
		r, err := once(bin, cpBin, tars, mirrors, i)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		results = append(results, r)
		fmt.Printf("run %d: %s\n", i+1, r.line(mirrors))
	}
	med := func(f func(result) time.Duration) time.Duration {
		var ds []time.Duration
		for _, r := range results {
			ds = append(ds, f(r))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	fmt.Printf("median of %d cold runs, from staticpodd's start:\n", runs)
	for _, c := range cluster.Components {
		fmt.Printf("  %-28s %s\n", c.Name+" exec'd", sec(med(func(r result) time.Duration { return r.exec[c.Name] })))
	}
	fmt.Printf("  %-28s %s\n", "all 4 processes exec'd", sec(med(func(r result) time.Duration { return r.allExec })))
	fmt.Printf("  %-28s %s\n", "/readyz ok", sec(med(func(r result) time.Duration { return r.readyz })))
	if mirrors {
		for _, c := range cluster.Components {
			fmt.Printf("  %-28s %s\n", c.Name+" mirror visible", sec(med(func(r result) time.Duration { return r.mirror[c.Name] })))
		}
		fmt.Printf("  %-28s %s\n", "4 mirror pods visible", sec(med(func(r result) time.Duration { return r.allMirrors })))
		fmt.Printf("  %-28s %s\n", "4 mirror pods Ready", sec(med(func(r result) time.Duration { return r.allReady })))
	}
	fmt.Printf("  %-28s %s\n", "4 pods Ready in staticpodd", sec(med(func(r result) time.Duration { return r.localReady })))
	rss, pss := []int64{}, []int64{}
	for _, r := range results {
		rss, pss = append(rss, r.rss), append(pss, r.pss)
	}
	slices.Sort(rss)
	slices.Sort(pss)
	fmt.Printf("  %-28s %.1f MiB\n", "RSS staticpodd + monitors", float64(rss[len(rss)/2])/(1<<20))
	fmt.Printf("  %-28s %.1f MiB\n", "PSS staticpodd + monitors", float64(pss[len(pss)/2])/(1<<20))
	if rest > 0 {
		medMiB := func(f func(result) int64) float64 {
			var v []int64
			for _, r := range results {
				v = append(v, f(r))
			}
			slices.Sort(v)
			return float64(v[len(v)/2]) / (1 << 20)
		}
		fmt.Printf("  %-28s %.1f MiB (anonymous %.1f, file %.1f)\n", fmt.Sprintf("staticpodd at rest (%s)", rest),
			medMiB(func(r result) int64 { return r.restRSS }), medMiB(func(r result) int64 { return r.restAnon }),
			medMiB(func(r result) int64 { return r.restFile }))
	}
	return nil
}

func (r result) line(mirrors bool) string {
	var b strings.Builder
	for _, c := range cluster.Components {
		fmt.Fprintf(&b, "%s %s, ", c.Name, sec(r.exec[c.Name]))
	}
	fmt.Fprintf(&b, "all exec'd %s, /readyz %s, ", sec(r.allExec), sec(r.readyz))
	if mirrors {
		fmt.Fprintf(&b, "4 mirrors %s, all Ready %s, ", sec(r.allMirrors), sec(r.allReady))
	}
	fmt.Fprintf(&b, "Ready in staticpodd %s, RSS %.1f MiB (staticpodd %.1f MiB + %d monitors), PSS %.1f MiB",
		sec(r.localReady), float64(r.rss)/(1<<20), float64(r.daemonRSS)/(1<<20), r.monitors, float64(r.pss)/(1<<20))
	if rest > 0 {
		fmt.Fprintf(&b, "; staticpodd %s later %.1f MiB (anonymous %.1f, file %.1f)", rest,
			float64(r.restRSS)/(1<<20), float64(r.restAnon)/(1<<20), float64(r.restFile)/(1<<20))
	}
	return b.String()
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// once is one cold run.
func once(bin, cpBin string, tars []string, mirrors bool, i int) (r result, err error) {
	id := fmt.Sprintf("%d-%d", os.Getpid(), i)
	dir, err := os.MkdirTemp("", "staticpodd-cpbench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	ns, err := cluster.NewNetns("staticpodd-cpbench-" + id)
	if err != nil {
		return r, err
	}
	defer ns.Close()
	node := "cpbench-" + id
	ctx := context.Background()
	cl, err := cluster.Generate(ctx, cpBin, filepath.Join(dir, "cluster"), node, ns)
	if err != nil {
		return r, err
	}
	d := &daemon{
		bin:       bin,
		dir:       dir,
		runDir:    "/run/staticpodd-cpbench-" + id,
		manifests: filepath.Join(dir, "manifests"),
		cgroup:    "/staticpodd-cpbench-" + id,
	}
	if err := d.prepare(tars); err != nil {
		return r, err
	}
	defer d.cleanup()
	for _, c := range cluster.Components {
		b, err := os.ReadFile(cl.Manifest(c.Name))
		if err != nil {
			return r, err
		}
		if err := os.WriteFile(filepath.Join(d.manifests, c.Name+".yaml"), b, 0o644); err != nil {
			return r, err
		}
	}
	args := []string{"--node-ip", cluster.Address}
	if mirrors {
		args = append(args, "--kubeconfig", cl.Kubeconfig("kubelet"))
	}
	if err := d.start(ns, node, args); err != nil {
		return r, err
	}
	// super-admin.conf: admin.conf's binding does not exist yet.
	client, server, err := cl.Client("super-admin")
	if err != nil {
		return r, err
	}
	r, err = measure(d, ns, client, server, node, mirrors)
	if err != nil {
		return r, fmt.Errorf("%w\nstaticpodd output:\n%s", err, d.out.String())
	}
	if rest > 0 {
		// At rest: the pods Ready, the mirror pods and the Node kept up
		// to date, the Lease renewed; nothing else happens.
		time.Sleep(rest)
		if err := d.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return r, fmt.Errorf("staticpodd gone while at rest: %w\n%s", err, d.out.String())
		}
		pid := d.cmd.Process.Pid
		r.restRSS = memOf(pid, "VmRSS:", "status")
		r.restAnon = memOf(pid, "RssAnon:", "status")
		r.restFile = memOf(pid, "RssFile:", "status")
		if r.restRSS == 0 { // exited, not yet reaped: no memory lines
			return r, fmt.Errorf("staticpodd's memory at rest unreadable (exited?)\n%s", d.out.String())
		}
	}
	return r, nil
}

// measure polls every 10 ms until all is Ready; exec times come from the
// processes' start times, exact to a clock tick.
func measure(d *daemon, ns *cluster.Netns, client *http.Client, server, node string, mirrors bool) (result, error) {
	r := result{exec: map[string]time.Duration{}, mirror: map[string]time.Duration{}}
	self, err := cluster.ProcOf(d.cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	since := func() time.Duration { return time.Since(d.started) }
	deadline := time.Now().Add(5 * time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("not all Ready within 5 minutes: %+v", r)
		}
		if len(r.exec) < len(cluster.Components) {
			procs, err := ns.Procs()
			if err != nil {
				return r, err
			}
			for _, c := range cluster.Components {
				if p, ok := procs[c.Comm]; ok && r.exec[c.Name] == 0 {
					r.exec[c.Name] = time.Duration(float64(p.Ticks-self.Ticks) * cluster.ClockTick * float64(time.Second))
					r.allExec = max(r.allExec, r.exec[c.Name])
				}
			}
		}
		if r.readyz == 0 {
			if body, err := get(client, server+"/readyz"); err == nil && string(body) == "ok" {
				r.readyz = since()
			}
		}
		if r.localReady == 0 && d.allReady() {
			r.localReady = since()
		}
		if mirrors && r.readyz > 0 && r.allReady == 0 {
			body, err := get(client, server+"/api/v1/namespaces/kube-system/pods")
			var list v1.PodList
			if err == nil && json.Unmarshal(body, &list) == nil {
				ready := 0
				for _, p := range list.Items {
					c := strings.TrimSuffix(p.Name, "-"+node)
					if _, seen := r.mirror[c]; !seen && p.Annotations["kubernetes.io/config.mirror"] != "" {
						r.mirror[c] = since()
					}
					if isReady(&p) {
						ready++
					}
				}
				if len(r.mirror) == len(cluster.Components) && r.allMirrors == 0 {
					r.allMirrors = since()
				}
				if ready == len(cluster.Components) {
					r.allReady = since()
				}
			}
		}
		if r.localReady > 0 && r.readyz > 0 && len(r.exec) == len(cluster.Components) && (!mirrors || r.allReady > 0) {
			break
		}
	}
	r.daemonRSS = memOf(d.cmd.Process.Pid, "VmRSS:", "status")
	r.rss = r.daemonRSS
	r.pss = memOf(d.cmd.Process.Pid, "Pss:", "smaps_rollup")
	for _, pid := range d.monitors() {
		r.rss += memOf(pid, "VmRSS:", "status")
		r.pss += memOf(pid, "Pss:", "smaps_rollup")
		r.monitors++
	}
	return r, nil
}

func get(client *http.Client, url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

func isReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// daemon is one staticpodd of a run, with paths of its own.
type daemon struct {
	bin, dir, runDir, manifests, cgroup string
	cmd                                 *exec.Cmd
	out                                 bytes.Buffer
	started                             time.Time
	sock                                *http.Client
}

func (d *daemon) common() []string {
	return []string{"--root-dir", filepath.Join(d.dir, "root"), "--run-dir", d.runDir}
}

// prepare writes the config and imports the images.
func (d *daemon) prepare(tars []string) error {
	if err := os.MkdirAll(d.manifests, 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
podLogsDir: %s
cgroupRoot: %s
`, d.manifests, filepath.Join(d.dir, "logs"), d.cgroup)
	if err := os.WriteFile(filepath.Join(d.dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	args := append(append([]string{"images", "import"}, tars...), d.common()...)
	if out, err := exec.Command(d.bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("staticpodd images import: %v\n%s", err, out)
	}
	sock := filepath.Join(d.runDir, "staticpodd.sock")
	d.sock = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", sock)
		},
	}}
	return nil
}

func (d *daemon) start(ns *cluster.Netns, node string, extra []string) error {
	args := append(ns.Wrap(), d.bin, "run", "--config", filepath.Join(d.dir, "config.yaml"), "--hostname-override", node)
	args = append(append(args, d.common()...), extra...)
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.started = time.Now()
	return d.cmd.Start()
}

// pods is staticpodd's /pods, over its socket.
func (d *daemon) pods() ([]v1.Pod, error) {
	body, err := get(d.sock, "http://staticpodd/pods")
	if err != nil {
		return nil, err
	}
	var list v1.PodList
	err = json.Unmarshal(body, &list)
	return list.Items, err
}

func (d *daemon) allReady() bool {
	pods, err := d.pods()
	if err != nil || len(pods) != len(cluster.Components) {
		return false
	}
	for _, p := range pods {
		if !isReady(&p) {
			return false
		}
	}
	return true
}

// monitors are the pids of this daemon's monitors.
func (d *daemon) monitors() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("staticpodd-monitor\x00")) || !bytes.Contains(b, []byte(d.runDir+"/")) {
			continue
		}
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		pids = append(pids, pid)
	}
	return pids
}

// cleanup removes the manifests, waits until staticpodd removed every pod,
// stops it and removes what is left of its state.
func (d *daemon) cleanup() {
	if d.cmd != nil && d.cmd.Process != nil {
		entries, _ := os.ReadDir(d.manifests)
		for _, e := range entries {
			os.Remove(filepath.Join(d.manifests, e.Name()))
		}
		for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			pods, err := d.pods()
			sbs, _ := os.ReadDir(filepath.Join(d.runDir, "pods"))
			if err == nil && len(pods) == 0 && len(sbs) == 0 {
				break
			}
		}
		d.cmd.Process.Signal(syscall.SIGTERM)
		d.cmd.Wait()
	}
	os.RemoveAll(d.runDir)
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + d.cgroup)
	for _, dir := range dirs {
		os.Remove(dir)
	}
}

// memOf is the field key (in kB) of /proc/<pid>/<file>, in bytes.
func memOf(pid int, key, file string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	return 0
}
