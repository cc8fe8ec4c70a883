package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/staticpodd/staticpodd/agent/rollout"
)

// The faults of this file make generations: a bad edit of a pod with
// staticpodd.io/rollback-after, rolled back; edits and removals of the pods
// others start after (staticpodd.io/start-after); staticpodd restart. Each
// may be followed at once by a kill -9 of the daemon, so that the next one
// finds the rollout, the wait or the restart half done.

// addGenerationPods adds the pods of these faults to s.pods: a chain of
// three (chaosdep, chaosmid after it, chaosleaf after chaosmid), churned
// like the others, and chaosrb, with rollback-after, which only the
// rollout fault edits and nothing removes until the end.
func (s *soak) addGenerationPods() {
	mk := func(name string) *spec {
		p := &spec{name: name, shape: stable, gen: 1, marks: filepath.Join(s.d.Dir, "marks", name), rate: 100, added: map[int]bool{}}
		if err := os.MkdirAll(p.marks, 0o755); err != nil {
			s.t.Fatal(err)
		}
		s.pods = append(s.pods, p)
		s.byFN[p.name+"-"+s.d.Name] = p
		return p
	}
	dep, mid, leaf := mk("chaosdep"), mk("chaosmid"), mk("chaosleaf")
	dep.readyMark, mid.readyMark = true, true
	mid.after, leaf.after = dep, mid
	leaf.onChange = filepath.Join(s.d.Dir, "chaosleaf.conf")
	s.chain = []*spec{dep, mid, leaf}
	s.rb = mk("chaosrb")
	// Critical: an eviction would fail its rollout, which is not the
	// rollout fault's doing.
	s.rb.rollbackAfter, s.rb.critical, s.rb.bad = true, true, map[int]badness{}
}

// rolloutStatus is `staticpodd rollout status POD`.
func (s *soak) rolloutStatus(name string) string {
	out, _ := s.d.CLIErr("rollout", "status", name)
	return strings.TrimSpace(out)
}

// awaitRolloutReady waits until the generation of p that runs has passed
// its rollback-after.
func (s *soak) awaitRolloutReady(p *spec) {
	s.d.Eventually(60*time.Second, p.name+"'s rollout ready", func() error {
		if err := s.listedLive(p, p.runningGen()); err != nil {
			return err
		}
		if out := s.rolloutStatus(p.name); !strings.HasPrefix(out, "ready:") {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})
}

// listedLive says why /pods does not list generation gen of p as its one
// generation not terminating, with its kept containers running.
func (s *soak) listedLive(p *spec, gen int) error {
	pods, err := getPods(s.d)
	if err != nil {
		return err
	}
	var live []string
	for _, lp := range pods {
		if lp.Name != p.name+"-"+s.d.Name || lp.DeletionTimestamp != nil {
			continue
		}
		live = append(live, listedGen(&lp))
		for _, cs := range statuses(&lp) {
			if listedGen(&lp) == strconv.Itoa(gen) && p.shape.kept(cs.Name) && cs.State.Running == nil {
				return fmt.Errorf("%s gen %d: %s not running: %+v", p.name, gen, cs.Name, cs.State)
			}
		}
	}
	if len(live) != 1 || live[0] != strconv.Itoa(gen) {
		return fmt.Errorf("%s: generations %v listed live, want %d", p.name, live, gen)
	}
	return nil
}

// rolloutFault edits chaosrb into a generation that is never Ready (its
// container exits at once, or its readiness probe never passes), kills the
// daemon with SIGKILL mid-rollout one time in two, and checks that the
// generation that was Ready runs again, flagged, and that a good edit after
// lifts the flag.
func (s *soak) rolloutFault() {
	p := s.rb
	s.awaitRolloutReady(p)
	good := p.gen
	how := badness(1 + s.rng.IntN(2))
	p.gen++
	p.bad[p.gen] = how
	s.chk.badGen(p.name, p.gen, how)
	// The generation rolled back to is the same UID run again: its
	// counts and marks are of two lives of it.
	s.chk.reuse(p.name, good)
	p.running = good
	s.write(p, map[badness]string{exitsNow: "bad edit (exits at once)", neverReady: "bad edit (never Ready)"}[how])
	edited := time.Now()
	if s.rng.IntN(2) == 0 {
		// Mid-rollout: once the bad generation is on disk, or even before.
		if s.rng.IntN(3) > 0 {
			s.d.Eventually(30*time.Second, "the bad generation listed", func() error {
				pods, err := getPods(s.d)
				if err != nil {
					return err
				}
				for _, lp := range pods {
					if lp.Name == p.name+"-"+s.d.Name && listedGen(&lp) == strconv.Itoa(p.gen) {
						return nil
					}
				}
				return fmt.Errorf("%s gen %d not listed", p.name, p.gen)
			})
		}
		before := s.runningKept()
		s.logf("kill -9 daemon mid-rollout of %s", p.name)
		s.kill9()
		time.Sleep(time.Duration(s.rng.IntN(3000)) * time.Millisecond)
		s.restartDaemon(before, map[*spec]bool{p: true})
	}
	s.d.Eventually(60*time.Second, p.name+" rolled back", func() error {
		if err := s.listedLive(p, good); err != nil {
			return err
		}
		if out := s.rolloutStatus(p.name); !strings.Contains(out, "rolled back (deadline)") {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})
	took := time.Since(edited)
	s.rollbacks = append(s.rollbacks, took)
	s.logf("%s rolled back to gen %d %s after the bad edit", p.name, good, took.Round(time.Millisecond))
	if ps, _ := s.d.CLIErr("ps"); !strings.Contains(ps, "rolled back (deadline)") {
		s.failf("%s rolled back, but ps does not flag its file:\n%s", p.name, ps)
	}
	// Why, with the exit code or the probe, in the history and the events.
	why := map[badness]string{exitsNow: fmt.Sprintf("exit code %d", crashCode), neverReady: "readiness probe of main"}[how]
	if h, _ := s.d.CLIErr("rollout", "history", p.name); !strings.Contains(h, why) {
		s.failf("%s rolled back, but its rollout history does not say %q:\n%s", p.name, why, h)
	}
	if ev, _ := s.d.CLIErr("describe", p.name); !strings.Contains(ev, "RolledBack") {
		s.failf("%s rolled back, but describe has no RolledBack event:\n%s", p.name, ev)
	}
	if s.rng.IntN(3) == 0 {
		// A daemon that starts on a rolled-back pod keeps it so.
		before := s.runningKept()
		s.kill9()
		s.restartDaemon(before, nil)
		if err := s.listedLive(p, good); err != nil {
			s.failf("after a daemon restart: %v", err)
		}
	}

	// The good edit lifts the flag and runs.
	p.gen++
	p.running = 0
	s.write(p, "good edit")
	s.awaitRolloutReady(p)
	if ps, _ := s.d.CLIErr("ps"); strings.Contains(ps, "rolled back") {
		s.failf("%s runs a good edit, but ps still flags it:\n%s", p.name, ps)
	}
}

// orderFault acts on the chain while a dependent waits: the pod it starts
// after and itself edited together (it waits for the new generation's
// readiness), or that pod removed and itself edited (it waits on a name no
// manifest defines), or that pod's monitor killed; and then, two times in
// three, kills the daemon with SIGKILL while the dependent waits, and
// brings back the removed pod while no daemon runs, or after.
func (s *soak) orderFault() {
	dep, mid := s.chain[0], s.chain[1]
	changed := map[*spec]bool{}
	edit := func(p *spec) {
		changed[p] = true
		if !p.present {
			s.add(p)
			return
		}
		p.gen++
		s.write(p, "edit")
	}
	before := s.runningKept()
	switch s.rng.IntN(3) {
	case 0:
		edit(dep)
		if mid.present {
			// Its new generation waits for the new one of the pod it
			// starts after (added again, it is a UID that ran before).
			edit(mid)
			s.minDepGen[fmt.Sprintf("%s %d", mid.name, mid.gen)] = dep.gen
		} else {
			edit(mid)
		}
	case 1:
		if dep.present {
			s.remove(dep)
		}
		changed[dep] = true
		edit(mid)
	default:
		s.killMonitor(func(name string) bool { return name == dep.name+"-"+s.d.Name })
		return
	}
	if s.rng.IntN(3) == 0 {
		if !dep.present {
			time.Sleep(time.Duration(s.rng.IntN(2000)) * time.Millisecond)
			s.add(dep)
		}
		return
	}
	s.logf("kill -9 daemon while %s waits", mid.name)
	s.kill9()
	if !dep.present && s.rng.IntN(2) == 0 {
		s.add(dep)
	}
	s.restartDaemon(before, changed)
	if !dep.present && s.rng.IntN(2) == 0 {
		s.add(dep)
	}
}

// restartFault runs staticpodd restart on a pod, or one time in four
// changes the file chaosleaf restarts on, then kills the daemon with
// SIGKILL at once one time in two: the restart is kept, the pod neither
// restarted again nor brought back to its generation before. The file may
// change while no daemon runs, too.
func (s *soak) restartFault() {
	if leaf := s.chain[2]; s.rng.IntN(4) == 0 {
		before := s.runningKept()
		writeConf := func() {
			s.logf("change %s, which %s restarts on", leaf.onChange, leaf.name)
			if err := os.WriteFile(leaf.onChange, []byte(strconv.FormatUint(s.rng.Uint64(), 10)), 0o644); err != nil {
				s.fatalf("%v", err)
			}
			s.confChanges++
		}
		down := s.rng.IntN(2) == 0
		if !down {
			writeConf()
			if s.rng.IntN(2) == 0 {
				return
			}
		}
		s.kill9()
		if down {
			writeConf()
		}
		s.restartDaemon(before, map[*spec]bool{leaf: true})
		return
	}
	var ps []*spec
	for _, p := range s.pods {
		if p.present && p != s.rb {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return
	}
	p := ps[s.rng.IntN(len(ps))]
	before := s.runningKept()
	s.logf("staticpodd restart %s (%s) gen %d", p.name, p.shape, p.gen)
	if out, err := s.d.CLIErr("restart", p.name); err != nil || !strings.Contains(out, "restarted") {
		s.failf("staticpodd restart %s: %v\n%s", p.name, err, out)
		return
	}
	s.restarts++
	if s.rng.IntN(2) == 0 {
		return
	}
	s.logf("kill -9 daemon just after the restart of %s", p.name)
	s.kill9()
	s.restartDaemon(before, map[*spec]bool{p: true})
}

// maxDepAge is the most a dependent's first run may come after the pod it
// starts after last passed its readiness probe (each second while Ready):
// the probe's period, the dependent's sandbox and container made, on a
// machine busy with the soak.
const maxDepAge = 20

// checkStartOrder checks that the first run of each generation of a
// dependent came while the pod it starts after was Ready: its readiness
// probe had passed, at most maxDepAge seconds before, and for a dependent
// edited with that pod, the probe of that pod's new generation.
func (s *soak) checkStartOrder() {
	for _, p := range s.chain {
		if p.after == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.marks, depsFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.failf("%v", err)
			continue
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) != 5 {
				s.failf("%s: %s line %q", p.name, depsFile, line)
				continue
			}
			uid, gen, run, age, depGen := f[0], f[1], f[2], f[3], f[4]
			if run != "1" {
				continue // a restart in the same life, or a later life: no wait
			}
			s.depStarts++
			s.logf("%s gen %s (UID %s) started %ss after %s's readiness probe passed, gen %s of it Ready by then", p.name, gen, uid, age, p.after.name, depGen)
			if age, _ := strconv.Atoi(age); age > maxDepAge {
				s.failf("%s gen %s (UID %s) started %ds after %s last passed its readiness probe (never, if that is the epoch): it starts after it",
					p.name, gen, uid, age, p.after.name)
			}
			if want, ok := s.minDepGen[p.name+" "+gen]; ok {
				if got, _ := strconv.Atoi(depGen); got < want {
					s.failf("%s gen %s (UID %s) started when %s gen %d had not yet passed its readiness probe (gen %d had): they were edited together",
						p.name, gen, uid, p.after.name, want, got)
				}
			}
		}
	}
}

// checkRecords checks, once every pod is gone, that the rollout histories
// and restart markers are bounded: no marker is left (each goes with its
// pod's name), and no more histories than pod names, each of at most
// rollout.MaxGenerations.
func (s *soak) checkRecords() {
	b, err := os.ReadFile(filepath.Join(s.d.RootDir, "restarts.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.failf("%v", err)
	}
	if err == nil {
		var markers map[string]string
		if err := json.Unmarshal(b, &markers); err != nil {
			s.failf("restarts.json: %v", err)
		}
		if len(markers) > 0 {
			s.failf("every pod is gone, but restarts.json keeps markers: %v", markers)
		}
	}
	dir := filepath.Join(s.d.RootDir, "rollouts")
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.failf("%v", err)
	}
	if len(ents) > len(s.pods) {
		s.failf("%d rollout histories for %d pod names", len(ents), len(s.pods))
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			s.failf("%v", err)
			continue
		}
		var h rollout.History
		if err := json.Unmarshal(b, &h); err != nil {
			s.failf("rollout history %s: %v", e.Name(), err)
			continue
		}
		if len(h.Generations) > rollout.MaxGenerations {
			s.failf("rollout history %s keeps %d generations", e.Name(), len(h.Generations))
		}
		s.histories = max(s.histories, len(h.Generations))
	}
	s.logf("records: %d rollout histories, the longest of %d generations; no restart marker", len(ents), s.histories)
}
