package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/kubeapi"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// soak is one run of the scenario loop.
type soak struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	cycle atomic.Int64
	d     *testdaemon.Daemon
	fs    *loopFS
	url   *testdaemon.ManifestServer
	pods  []*spec
	byFN  map[string]*spec // by full name; fixed once made
	dir   string           // scratch files of the editors
	chk   *checker

	faults    map[string]int
	adoptions []time.Duration
	api       *apiServer // nil when the soak runs no API server
	// forkWindows are the times a child the daemon was forking held its
	// socket or lock after its kill -9.
	forkWindows []time.Duration
	kills       int // of the daemon, with SIGKILL

	chain     []*spec         // pods started after one another, the first first
	rb        *spec           // the pod with rollback-after
	churned   map[*spec]bool  // the cycle's churn changed them: see runningKept
	rollbacks []time.Duration // from the bad edit to the generation that was Ready running again
	restarts  int             // staticpodd restart
	// confChanges: of the file chaosleaf restarts on (restart-on-change)
	confChanges int
	depStarts   int // runs of dependents checked against their dependency's readiness
	// minDepGen: by "name gen" of a dependent, the generation of the pod it
	// starts after that was edited with it, which it must wait for
	minDepGen map[string]int
	histories int // generations of the longest rollout history
}

// failf fails the soak, naming the seed and the cycle, from any goroutine.
func (s *soak) failf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("CHAOS_SEED=%d cycle %d: "+format, append([]any{s.seed, s.cycle.Load()}, args...)...)
}

// fatalf is failf that ends the soak; the main goroutine only.
func (s *soak) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("CHAOS_SEED=%d cycle %d: "+format, append([]any{s.seed, s.cycle.Load()}, args...)...)
}

func (s *soak) byFullName(name string) *spec { return s.byFN[name] }

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: not a number", name, v)
	}
	return n
}

// TestChaos is the soak. CHAOS_SEED (default: the time) makes a run
// repeatable as far as the soak's own choices go; CHAOS_CYCLES (default 6)
// and CHAOS_PODS (default 8, at most 30) make it longer and wider. With an
// API server (CHAOS_APISERVER, see apiServerWanted) the daemon keeps mirror
// pods on it, and one of the faults is its kill -9 and restart.
func TestChaos(t *testing.T) {
	testroot.Require(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: not a number", v)
		}
		seed = n
	}
	cycles := envInt(t, "CHAOS_CYCLES", 6)
	npods := min(envInt(t, "CHAOS_PODS", 8), 30)
	fmt.Printf("chaos: CHAOS_SEED=%d CHAOS_CYCLES=%d CHAOS_PODS=%d\n", seed, cycles, npods)
	withAPI, why, err := apiServerWanted()
	if err != nil {
		t.Fatal(err)
	}
	if !withAPI {
		fmt.Printf("chaos: NO API SERVER (%s): mirror pods and the API server fault are not exercised\n", why)
	}
	s := &soak{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed>>1|1)), faults: map[string]int{}}
	s.chk = newChecker(s)
	begin := time.Now()

	// Made before the daemon, so their cleanups run after its own.
	s.fs = newLoopFS(t, 1024)
	s.url = testdaemon.NewManifestServer(t, podList(nil))
	if withAPI {
		s.api = &apiServer{c: kubeapi.Start(t)}
		fmt.Printf("chaos: mirror pods on kube-apiserver %s\n", s.api.c.Server())
	}
	s.d = testdaemon.New(t)
	d := s.d
	if s.api != nil {
		d.Args = append(d.Args, "--kubeconfig", s.api.c.NodeKubeconfig(d.Name, s.api.c.Server()), "--node-ip", "127.0.0.1")
	}
	d.RootDir = filepath.Join(s.fs.mnt, "root")
	if err := os.MkdirAll(d.RootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.CLI("images", "import", testdaemon.Image)
	// Eviction on, with a threshold the full disk crosses: the pods that are
	// not critical may be evicted (Failed, Evicted) and start again afresh
	// once the pressure has been gone for 5 s; the critical ones never are.
	appendConfig(t, d.Config, fmt.Sprintf("staticPodURL: %s\nhttpCheckFrequency: 1s\ncontainerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 1000\n"+
		"evictionHard: {nodefs.available: 10%%, imagefs.available: 10%%}\nevictionPressureTransitionPeriod: 5s\n", s.url.URL()))
	s.dir = filepath.Join(d.Dir, "scratch")
	os.MkdirAll(s.dir, 0o755)
	// Whatever the soak was doing when it failed is undone before the
	// daemon's cleanup removes every pod.
	t.Cleanup(func() {
		if pid := d.PID(); pid > 0 {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		s.fs.free()
		s.url.Up()
		s.url.Set(podList(nil))
		if s.api != nil {
			// Up again, so that the daemon's cleanup finds it as it left it.
			select {
			case <-s.api.c.Etcd.Done():
				s.api.c.StartEtcd()
			default:
			}
			select {
			case <-s.api.c.APIServer.Done():
				s.api.c.StartAPIServer()
			default:
			}
		}
	})

	s.pods = make([]*spec, npods)
	s.byFN = map[string]*spec{}
	s.minDepGen = map[string]int{}
	for i := range s.pods {
		p := &spec{name: fmt.Sprintf("chaos%d", i), shape: shape(i % int(numShapes)), gen: 1,
			marks: filepath.Join(d.Dir, "marks", fmt.Sprintf("chaos%d", i)), rate: 100, added: map[int]bool{}}
		p.url = i%4 == 3
		p.critical = i%5 == 2
		p.hostNetwork = i%3 == 1 && p.shape != probed
		if p.shape == logger && i < int(numShapes) {
			p.rate = 1000 // 1 MB/s; the loggers after the first write 100 KB/s
		}
		if err := os.MkdirAll(p.marks, 0o755); err != nil {
			t.Fatal(err)
		}
		s.pods[i] = p
		s.byFN[p.name+"-"+d.Name] = p
	}
	s.addGenerationPods()
	vethsBefore, err := veths()
	if err != nil {
		t.Fatal(err)
	}

	d.Start()
	if s.api != nil {
		// The baseline is of a daemon that has registered its Node.
		s.checkMirrors(time.Now().Add(-time.Minute))
	}
	time.Sleep(2 * time.Second) // settle the idle daemon for its baseline
	fdList0 := fdList(d.PID())
	rss0, fds0, err := procStat(d.PID())
	if err != nil {
		t.Fatal(err)
	}

	ctx, stopSampler := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Go(func() { s.sample(ctx) })
	defer func() { stopSampler(); sampler.Wait() }()

	// Every pod starts present.
	for _, p := range s.pods {
		s.add(p)
	}
	s.converge(120 * time.Second)
	// Its first generation has nothing to go back to: passed before any fault.
	s.awaitRolloutReady(s.rb)

	for c := 1; c <= cycles && !t.Failed(); c++ {
		s.cycle.Store(int64(c))
		s.churned = map[*spec]bool{}
		for range 1 + s.rng.IntN(3) {
			s.churned[s.churn()] = true
		}
		s.fault()
		time.Sleep(time.Duration(500+s.rng.IntN(2500)) * time.Millisecond)
	}
	s.cycle.Store(int64(cycles + 1)) // the final checks
	if t.Failed() {
		t.FailNow()
	}

	// The churn has stopped: the running set is the manifests.
	setTime := s.converge(120 * time.Second)
	// One relist (2s), the stop of an old generation (its grace period, 2s),
	// and room for a busy machine.
	if setTime > 10*time.Second {
		s.failf("the listed pods took %s to match the manifests once the churn stopped, more than one relist and a stop", setTime)
	}
	pods, err := getPods(d)
	if err != nil {
		s.fatalf("GET /pods: %v", err)
	}
	s.chk.checkQuiet(pods)
	s.checkStartOrder()
	if s.api != nil {
		s.checkMirrors(time.Now().Add(-time.Minute))
	}
	for _, p := range pods {
		if sp := s.byFullName(p.Name); sp != nil && sp.shape == logger {
			if err := s.chk.checkLogs(d, &p); err != nil {
				s.failf("%v", err)
			}
		}
	}

	if t.Failed() {
		t.Logf("daemon output:\n%s", d.Output()) // the cleanup's daemon is another one
	}
	// Every manifest removed: nothing is left but the idle daemon.
	for _, p := range s.pods {
		if p.present {
			s.remove(p)
		}
	}
	d.Eventually(120*time.Second, "every pod gone", func() error {
		pods, err := getPods(d)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d pods left", len(pods))
		}
		if sbs, _ := os.ReadDir(filepath.Join(d.RunDir, "pods")); len(sbs) > 0 {
			var left []string
			for _, sb := range sbs {
				files, _ := os.ReadDir(filepath.Join(d.RunDir, "pods", sb.Name()))
				var names []string
				for _, f := range files {
					names = append(names, f.Name())
				}
				left = append(left, fmt.Sprintf("%s %v", sb.Name(), names))
			}
			return fmt.Errorf("%d sandboxes left: %s", len(sbs), strings.Join(left, "; "))
		}
		return nil
	})
	if s.api != nil {
		s.checkNoMirrors()
	}
	s.checkRecords()
	stopSampler()
	sampler.Wait()
	// The spare monitor outlives the node's last sandbox by a few seconds,
	// for a pod made again soon: the idle daemon is the one after it.
	d.Eventually(30*time.Second, "the spare monitor retired", func() error {
		if m := d.Monitors(); len(m) > 0 {
			return fmt.Errorf("monitors %v run", m)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // settle the idle daemon, as for its baseline
	rss1, fds1, err := procStat(d.PID())
	if err != nil {
		t.Fatal(err)
	}
	// The exec server outlives its last exec by half a minute, for probes a
	// few seconds apart: its handle is not a leak.
	fds1 -= execServerHandles(d.PID(), d.RunDir)
	t.Logf("the idle daemon's fds after the soak:\n%s", fdList(d.PID()))
	// The two leaks a count can hide under its margin: a handle on a process
	// that is gone, and a network namespace other than the host's (a pod's,
	// which the handle keeps alive).
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	for _, line := range strings.Split(fdList(d.PID()), "\n") {
		_, target, _ := strings.Cut(line, " -> ")
		if strings.HasPrefix(target, "anon_inode:[pidfd] of pid -1 ") ||
			(strings.HasPrefix(target, "net:[") && target != hostNet) {
			s.failf("the idle daemon holds %s after the soak", strings.TrimSpace(line))
		}
	}
	if fds1 > fds0+10 {
		s.failf("the idle daemon holds %d fds after the soak (its exec server's aside), %d before:\n%s\nbefore:\n%s", fds1, fds0, fdList(d.PID()), fdList0)
	}
	if rss1 > 2*rss0+20<<10 {
		s.failf("the idle daemon's RSS is %d KiB after the soak, %d KiB before", rss1, rss0)
	}
	d.Stop()
	d.Eventually(10*time.Second, "no monitor left once the daemon stopped", func() error {
		if m := d.Monitors(); len(m) > 0 {
			return fmt.Errorf("monitors %v still run", m)
		}
		return nil
	})
	d.AssertNoLeaks()
	// staticpodd makes no veth (pods have their own network namespace with
	// loopback only, or the host's), so a veth's host end outliving the soak
	// would need a pod's namespace kept alive, which AssertNoLeaks and the
	// idle daemon's fd check above fail on. The host is shared with other
	// tests that make veths of their own, which come and go during a soak:
	// new ones are reported, not failed on.
	vethsAfter, err := veths()
	if err != nil {
		s.failf("%v", err)
	}
	for name := range vethsAfter {
		if !vethsBefore[name] {
			t.Logf("veth interface %s appeared during the soak (not staticpodd's: it makes none)", name)
		}
	}
	worst := time.Duration(0)
	for _, a := range s.adoptions {
		worst = max(worst, a)
	}
	s.chk.mu.Lock()
	samples, procSeen, logLines := s.chk.samples, s.chk.procSeen, s.chk.logLines
	s.chk.mu.Unlock()
	if samples == 0 || procSeen == 0 {
		s.failf("the checks saw nothing: %d samples of /pods, %d container processes", samples, procSeen)
	}
	s.chk.mu.Lock()
	evictions, refusals := s.chk.evictions, s.chk.refusals
	s.chk.mu.Unlock()
	fmt.Printf("chaos: after kill -9 the socket or lock was held by a child between fork and exec %d times (of %d kills), longest %s\n",
		len(s.forkWindows), s.kills, slices.Max(append(s.forkWindows, 0)))
	fmt.Printf("chaos: evictions=%d refused-at-admission=%d (pods not critical; the critical ones were never)\n", evictions, refusals)
	fmt.Printf("chaos: rollbacks=%d (worst %s from the bad edit) restarts=%d restart-on-change-edits=%d dependent-starts-checked=%d longest-rollout-history=%d\n",
		len(s.rollbacks), slices.Max(append(s.rollbacks, 0)).Round(time.Millisecond), s.restarts, s.confChanges, s.depStarts, s.histories)
	fmt.Printf("chaos: CHAOS_SEED=%d cycles=%d pods=%d wall=%s faults=%v restarts-of-daemon=%d worst-adoption=%s "+
		"final-converge=%s status-samples=%d processes-checked=%d log-lines-checked=%d daemon-idle rss=%dKiB->%dKiB fds=%d->%d\n",
		seed, cycles, npods, time.Since(begin).Round(time.Second), s.faults, len(s.adoptions), worst.Round(time.Millisecond),
		setTime.Round(time.Millisecond), samples, procSeen, logLines, rss0, rss1, fds0, fds1)
	if a := s.api; a != nil {
		fmt.Printf("chaos: API server outages=%d (with etcd %d) longest=%s; after /readyz, worst: mirror pods in order %s, with Node and Lease %s (bound %s)\n",
			len(a.outages), a.etcd, slices.Max(append(a.outages, 0)).Round(time.Millisecond),
			slices.Max(append(a.podsBack, 0)).Round(time.Millisecond), slices.Max(append(a.catchUps, 0)).Round(time.Millisecond), mirrorBound)
	} else {
		fmt.Println("chaos: NO API SERVER: mirror pods and the API server fault were not exercised")
	}
}

func appendConfig(t *testing.T, file, text string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// sample runs the checks of every moment until ctx ends: processes four
// times a second, /pods once a second.
func (s *soak) sample(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.chk.sampleProcs()
		if n%4 == 0 {
			if pods, err := getPods(s.d); err == nil {
				s.chk.sampleStatus(pods)
			}
		}
	}
}

// add makes p's manifest present, with a random editor or in the URL's list.
func (s *soak) add(p *spec) {
	p.present = true
	if p.added[p.gen] {
		// The same manifest again is the same UID: its runs' marks now
		// count two lives of it.
		s.chk.reuse(p.name, p.gen)
	}
	s.write(p, "add")
}

// logf logs what the soak does, with the cycle, so a failure shows what led
// to it.
func (s *soak) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("%s cycle %d: "+format, append([]any{time.Now().UTC().Format("15:04:05.000"), s.cycle.Load()}, args...)...)
}

func (s *soak) write(p *spec, what string) {
	p.added[p.gen] = true
	if p.url {
		s.logf("%s %s (%s) gen %d in the URL's list", what, p.name, p.shape, p.gen)
		s.url.Set(podList(s.urlPods()))
		return
	}
	e := editors[s.rng.IntN(len(editors))]
	s.logf("%s %s (%s) gen %d: %s", what, p.name, p.shape, p.gen, e.name)
	if err := e.write(s.d.Manifests, s.dir, p.name+".yaml", p.manifest()); err != nil {
		s.fatalf("%s %s: %v", e.name, p.name, err)
	}
}

func (s *soak) remove(p *spec) {
	s.logf("remove %s (%s) gen %d", p.name, p.shape, p.gen)
	p.present = false
	if p.url {
		s.url.Set(podList(s.urlPods()))
		return
	}
	if err := os.Remove(filepath.Join(s.d.Manifests, p.name+".yaml")); err != nil {
		s.fatalf("remove %s: %v", p.name, err)
	}
}

func (s *soak) urlPods() []*spec {
	var ps []*spec
	for _, p := range s.pods {
		if p.url && p.present {
			ps = append(ps, p)
		}
	}
	return ps
}

// churn adds, edits or removes one pod's manifest at random, and returns
// the pod.
func (s *soak) churn() *spec {
	p := s.pods[s.rng.IntN(len(s.pods))]
	for p == s.rb {
		p = s.pods[s.rng.IntN(len(s.pods))] // only the rollout fault edits it
	}
	switch r := s.rng.IntN(10); {
	case !p.present:
		s.add(p)
	case r < 6:
		p.gen++
		s.write(p, "edit")
	default:
		s.remove(p)
	}
	return p
}

// fault does one random harm to the daemon, its monitors, its disk or its
// sources, and undoes it.
func (s *soak) fault() {
	d := s.d
	kinds := []string{"kill -9 daemon", "kill -9 monitor", "SIGSTOP daemon", "disk full", "URL server down", "rollout", "start order", "restart pod"}
	if s.api != nil {
		kinds = append(kinds, "API server restart")
	}
	if only := os.Getenv("CHAOS_FAULTS"); only != "" {
		// For replaying one kind of fault: a comma-separated list of kinds.
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(strings.Split(only, ","), k) })
	}
	kind := kinds[s.rng.IntN(len(kinds))]
	s.faults[kind]++
	s.logf("fault: %s", kind)
	switch kind {
	case "kill -9 daemon":
		before := s.runningKept()
		s.kill9()
		changed := map[*spec]bool{}
		if s.rng.IntN(2) == 0 {
			changed[s.churn()] = true // a manifest changes while no daemon runs
		}
		if s.rng.IntN(3) == 0 {
			before = s.killMonitorWhileDown(before) // the next daemon must see it died
		}
		s.restartDaemon(before, changed)
	case "kill -9 monitor":
		s.killMonitor(func(string) bool { return true })
	case "rollout":
		s.rolloutFault()
	case "start order":
		s.orderFault()
	case "restart pod":
		s.restartFault()
	case "SIGSTOP daemon":
		d.Signal(syscall.SIGSTOP)
		time.Sleep(2 * time.Second)
		if s.rng.IntN(2) == 0 {
			s.churn() // seen when it wakes
		}
		time.Sleep(3 * time.Second) // in all longer than any probe's period (2s)
		d.Signal(syscall.SIGCONT)
	case "disk full":
		if err := s.fs.fillUp(); err != nil {
			s.fatalf("%v", err)
		}
		full := 3 * time.Second
		if s.rng.IntN(2) == 0 {
			// Longer than the eviction manager's period (10 s): it sees
			// the pressure, reclaims what it can, and evicts.
			full = 12 * time.Second
		}
		s.logf("the disk is full for %s", full)
		began := time.Now()
		for range 1 + s.rng.IntN(2) {
			s.churn() // new containers need snapshots on the full disk
		}
		if s.rng.IntN(3) == 0 {
			// A daemon that starts on a full disk adopts what runs.
			s.logf("kill -9 daemon and start another on the full disk")
			s.kill9()
			d.Start()
		}
		time.Sleep(time.Until(began.Add(full)))
		s.fs.free()
	case "URL server down":
		s.url.Down()
		if s.rng.IntN(2) == 0 {
			s.churn()
		}
		time.Sleep(3 * time.Second) // three polls
		s.url.Up()
	case "API server restart":
		s.apiServerOutage()
	}
}

// runningKept maps the IDs of running containers that never exit by
// themselves to their pod's full name, for pods whose manifest is as listed.
func (s *soak) runningKept() map[string]string {
	pods, err := getPods(s.d)
	if err != nil {
		s.fatalf("GET /pods: %v", err)
	}
	ids := map[string]string{}
	for _, p := range pods {
		sp := s.byFullName(p.Name)
		// A pod the cycle's churn changed may be stopped already: a
		// manifest removed and written back restarts its pod, which the
		// daemon may have begun in the moment before a fault.
		if p.DeletionTimestamp != nil || sp == nil || !sp.present || listedGen(&p) != strconv.Itoa(sp.runningGen()) || s.churned[sp] {
			continue // being stopped, or about to be
		}
		for _, cs := range statuses(&p) {
			if cs.State.Running != nil && sp.shape.kept(cs.Name) {
				ids[cs.ContainerID] = p.Name
			}
		}
	}
	return ids
}

func runningIDs(pods []v1.Pod) map[string]bool {
	ids := map[string]bool{}
	for _, p := range pods {
		for _, cs := range statuses(&p) {
			if cs.State.Running != nil {
				ids[cs.ContainerID] = true
			}
		}
	}
	return ids
}

// listedGen is the generation of a listed pod, from its environment.
func listedGen(p *v1.Pod) string {
	for _, e := range p.Spec.Containers[len(p.Spec.Containers)-1].Env {
		if e.Name == "CHAOS_GEN" {
			return e.Value
		}
	}
	return ""
}

// converge waits until /pods lists exactly the present manifests, each of
// its generation, none terminating, and their kept containers run; it
// returns how long the set took to match.
func (s *soak) converge(timeout time.Duration) time.Duration {
	start := time.Now()
	var setAt time.Duration
	s.d.Eventually(timeout, "the running set equals the manifests", func() error {
		pods, err := getPods(s.d)
		if err != nil {
			return err
		}
		var got, want []string
		for _, p := range pods {
			gen := listedGen(&p)
			state := ""
			if p.DeletionTimestamp != nil {
				state = " terminating"
			}
			got = append(got, fmt.Sprintf("%s gen %s%s", p.Name, gen, state))
		}
		for _, p := range s.pods {
			if p.present {
				want = append(want, fmt.Sprintf("%s-%s gen %d", p.name, s.d.Name, p.runningGen()))
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("listed %v, manifests %v", got, want)
		}
		if setAt == 0 {
			setAt = time.Since(start)
		}
		for _, p := range pods {
			sp := s.byFullName(p.Name)
			if sp.waitsOn() {
				continue // it waits for a pod that is not there
			}
			for _, cs := range statuses(&p) {
				if sp.shape.kept(cs.Name) && cs.State.Running == nil {
					return fmt.Errorf("%s/%s not running: %+v", p.Name, cs.Name, cs.State)
				}
			}
		}
		return nil
	})
	return setAt
}

// restartDaemon starts the daemon after its kill -9 and waits until every
// kept container that ran before (before, from runningKept), of a pod not
// changed meanwhile, is adopted: listed running again.
func (s *soak) restartDaemon(before map[string]string, changed map[*spec]bool) {
	d := s.d
	start := time.Now()
	d.Start()
	d.Eventually(60*time.Second, "every running container adopted", func() error {
		pods, err := getPods(d)
		if err != nil {
			return err
		}
		now := runningIDs(pods)
		for id, fn := range before {
			if p := s.byFullName(fn); !changed[p] && !now[id] {
				return fmt.Errorf("container %s of %s not listed running", id, fn)
			}
		}
		return nil
	})
	s.adoptions = append(s.adoptions, time.Since(start))
	s.logf("adopted in %s", time.Since(start).Round(time.Millisecond))
}

// killMonitor kills the monitor of a random running container of a pod not
// being stopped whose full name passes pick, and records it.
func (s *soak) killMonitor(pick func(fullName string) bool) {
	pods, err := getPods(s.d)
	if err != nil {
		s.fatalf("GET /pods: %v", err)
	}
	type target struct {
		k  ckey
		id string
	}
	var ts []target
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !pick(p.Name) {
			continue
		}
		for _, cs := range statuses(&p) {
			if cs.State.Running != nil {
				ts = append(ts, target{ckey{string(p.UID), cs.Name}, strings.TrimPrefix(cs.ContainerID, "staticpodd://")})
			}
		}
	}
	if len(ts) == 0 {
		return
	}
	tg := ts[s.rng.IntN(len(ts))]
	pid, err := monitorOf(s.d.RunDir, tg.id)
	if err != nil {
		return // it exited meanwhile
	}
	s.logf("kill -9 monitor %d of container %s (%s of pod UID %s)", pid, tg.id, tg.k.container, tg.k.uid)
	s.chk.killedMonitor(tg.k)
	syscall.Kill(pid, syscall.SIGKILL)
}

// killMonitorWhileDown kills the monitor of one of the running containers
// listed in before (ID to pod full name) while no daemon runs, and records
// it; the container must be taken as killed (137) by the next daemon.
func (s *soak) killMonitorWhileDown(before map[string]string) map[string]string {
	ids := slices.Sorted(maps.Keys(before))
	if len(ids) == 0 {
		return before
	}
	id := ids[s.rng.IntN(len(ids))]
	cid := strings.TrimPrefix(id, "staticpodd://")
	pid, err := monitorOf(s.d.RunDir, cid)
	if err != nil {
		return before
	}
	b, err := os.ReadFile(filepath.Join(s.d.RunDir, "containers", cid, "container.json"))
	if err != nil {
		return before
	}
	var rec struct {
		PodUID string `json:"podUID"`
		Name   string `json:"name"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		s.fatalf("container.json of %s: %v", cid, err)
	}
	s.logf("kill -9 monitor %d of container %s (%s of pod UID %s) while no daemon runs", pid, cid, rec.Name, rec.PodUID)
	s.chk.killedMonitor(ckey{rec.PodUID, rec.Name})
	syscall.Kill(pid, syscall.SIGKILL)
	delete(before, id)
	return before
}

// forkWindow is how long a child the daemon was forking when it was killed
// may hold its socket and lock: until its exec, a few syscalls away, on a
// machine busy enough to keep it from the CPU a while.
const forkWindow = 5 * time.Second

// kill9 kills the daemon with SIGKILL and checks that nothing holds its CLI
// socket or its run dir's lock (the next daemon would take it for another
// daemon's), but for exactly one window: a process the daemon was forking
// (a monitor, a container's init, an exec probe) when it died. Between
// clone and exec a child of a Go program holds a copy of every fd of its
// parent, close-on-exec ones too, and drops those at its exec; until then it
// runs the daemon's binary with the daemon's command line. Such a child gets
// forkWindow to exec or exit; anything else holding them, or a child that
// keeps them longer, fails the soak.
func (s *soak) kill9() {
	d := s.d
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.PID()))
	if err != nil {
		s.fatalf("the daemon's command line: %v", err)
	}
	d.Kill9()
	s.kills++
	paths := []string{filepath.Join(d.RunDir, "staticpodd.sock"), filepath.Join(d.RunDir, "staticpodd.lock")}
	start := time.Now()
	var seen []holder
	for {
		hs := holders(paths)
		if len(hs) == 0 {
			break
		}
		for _, h := range hs {
			if h.cmdline != string(cmdline) {
				s.fatalf("the daemon is dead, but %s is held by pid %d (parent %d), which is not a child it was forking: %q", h.path, h.pid, h.ppid, h.cmdline)
			}
		}
		if time.Since(start) > forkWindow {
			s.fatalf("the daemon is dead, but a child it was forking still holds its socket or lock after %s: %+v", forkWindow, hs)
		}
		if seen == nil {
			seen = hs
		}
		time.Sleep(time.Millisecond)
	}
	if seen != nil {
		took := time.Since(start)
		s.forkWindows = append(s.forkWindows, took)
		s.logf("the dead daemon's socket or lock was held for %s by a child it was forking, until its exec: %+v", took.Round(time.Microsecond), seen)
	}
}
