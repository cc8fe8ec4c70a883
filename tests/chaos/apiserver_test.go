package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/staticpodd/staticpodd/tests/kubeapi"
)

const (
	annotationMirror = "kubernetes.io/config.mirror" // on a mirror pod: the static pod's config hash
	annotationHash   = "kubernetes.io/config.hash"   // on a static pod (and its mirror): its UID
)

// mirrorBound is how long after the API server answers again (and the
// listed pods match the manifests) the mirror pods, the Node and its Lease
// may take to be what the daemon lists: a node lease renewal (10 s) and
// room for a busy machine.
const mirrorBound = 30 * time.Second

// apiServer is the API server (and etcd) the soak's daemon keeps its mirror
// pods on, when the soak runs one.
type apiServer struct {
	c        *kubeapi.Cluster
	catchUps []time.Duration // from /readyz to the mirror pods, Node and Lease in order
	podsBack []time.Duration // from /readyz to the mirror pods alone in order
	outages  []time.Duration
	etcd     int       // outages that killed etcd too
	orphans  []*v1.Pod // the last check's pods of the node that the daemon does not list
}

// apiServerWanted says whether the soak runs an API server, and why not:
// CHAOS_APISERVER=1 wants one (missing binaries fail the soak), =0 none, and
// unset one when the control plane's binaries are built.
func apiServerWanted() (bool, string, error) {
	_, err := kubeapi.BinDir()
	switch v := os.Getenv("CHAOS_APISERVER"); v {
	case "0":
		return false, "CHAOS_APISERVER=0", nil
	case "1":
		if err != nil {
			return false, "", fmt.Errorf("CHAOS_APISERVER=1: %w", err)
		}
		return true, "", nil
	case "":
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	default:
		return false, "", fmt.Errorf("CHAOS_APISERVER=%q: want 0 or 1", v)
	}
}

// apiServerOutage kills the API server with SIGKILL (and etcd with it, one
// time in three), churns manifests while it is down, starts it again after
// a random outage, and checks that no pod noticed and that the mirror pods,
// the Node and its Lease are in order within mirrorBound of its return.
func (s *soak) apiServerOutage() {
	a := s.api
	before := s.runningKept()
	_, fdsBefore, _ := procStat(s.d.PID())
	withEtcd := s.rng.IntN(3) == 0
	outage := time.Duration(1000+s.rng.IntN(9000)) * time.Millisecond
	s.logf("kill -9 kube-apiserver%s for %s", map[bool]string{true: " and etcd", false: ""}[withEtcd], outage)
	down := time.Now()
	a.c.APIServer.Kill()
	if withEtcd {
		a.c.Etcd.Kill()
		a.etcd++
	}
	changed := map[*spec]bool{}
	for range s.rng.IntN(3) {
		changed[s.churn()] = true // seen by the daemon, not by the API server
	}
	time.Sleep(time.Until(down.Add(outage)))
	if withEtcd {
		a.c.StartEtcd()
	}
	a.c.StartAPIServer()
	ready, err := a.c.Ready(120 * time.Second)
	if err != nil {
		s.fatalf("%v", err)
	}
	a.outages = append(a.outages, ready.Sub(down))

	// No pod stopped or restarted for the outage: every kept container that
	// ran before it, of a pod whose manifest did not change, runs still.
	pods, err := getPods(s.d)
	if err != nil {
		s.fatalf("GET /pods: %v", err)
	}
	now := runningIDs(pods)
	for id, fn := range before {
		if p := s.byFullName(fn); !changed[p] && !now[id] {
			s.failf("container %s of %s ran before the API server's outage and does not after it", id, fn)
		}
	}
	s.converge(120 * time.Second)
	podsTook, took := s.checkMirrors(ready)
	a.catchUps = append(a.catchUps, took)
	a.podsBack = append(a.podsBack, podsTook)
	s.logf("mirror pods in order %s after /readyz, with the Node and its Lease %s (down %s)",
		podsTook.Round(time.Millisecond), took.Round(time.Millisecond), ready.Sub(down).Round(time.Millisecond))
	rss, fds, _ := procStat(s.d.PID())
	s.logf("daemon fds %d before the outage, %d after; RSS %d KiB", fdsBefore, fds, rss)
	// A changed pod may hold a few more (its monitor's, its logs'); the
	// mirror client's connections are one or two.
	if fds > fdsBefore+10+5*len(changed) {
		s.failf("the daemon holds %d fds after the API server's outage, %d before:\n%s", fds, fdsBefore, fdList(s.d.PID()))
	}
}

// checkMirrors waits until the API server holds exactly one mirror pod for
// each pod the daemon lists (same name, config hash and UID annotations,
// node, phase, and the kept containers' IDs and states), none other on the
// node, the Node Ready and its Lease renewed since since, and fails the soak
// if that takes more than mirrorBound from the call (made once the listed
// pods match the manifests). It returns how long after since the mirror pods
// were in order, and everything.
func (s *soak) checkMirrors(since time.Time) (pods, all time.Duration) {
	start := time.Now()
	deadline := start.Add(mirrorBound)
	var last error
	for {
		podsErr, nodeErr := s.mirrorsMatch(since)
		if podsErr == nil && pods == 0 {
			pods = time.Since(since)
		}
		if last = errors.Join(podsErr, nodeErr); last == nil {
			return pods, time.Since(since)
		}
		if time.Now().After(deadline) {
			s.failf("mirror pods, Node or Lease not in order %s after the API server answered (%s after the listed pods matched the manifests): %v",
				time.Since(since).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), last)
			for _, m := range s.api.orphans {
				s.logf("the API server's writes to %s/%s:\n%s", m.Namespace, m.Name, s.api.c.Audit(m.Namespace, m.Name))
			}
			return pods, time.Since(since)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// mirrorsMatch compares the API server's pods of the node with the pods the
// daemon lists now, and checks the Node and its Lease.
func (s *soak) mirrorsMatch(leaseAfter time.Time) (pods, node error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, name := s.api.c.Admin, s.d.Name
	var wrong []string
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		wrong = append(wrong, fmt.Sprintf("node: %v", err))
	} else if !nodeReady(n) {
		wrong = append(wrong, fmt.Sprintf("node not Ready: %+v", n.Status.Conditions))
	}
	l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		wrong = append(wrong, fmt.Sprintf("lease: %v", err))
	} else if renew := leaseRenewed(l); !renew.After(leaseAfter) {
		wrong = append(wrong, fmt.Sprintf("lease last renewed %s, before %s", renew.UTC().Format(time.TimeOnly), leaseAfter.UTC().Format(time.TimeOnly)))
	}
	if len(wrong) > 0 {
		node = fmt.Errorf("%s", strings.Join(wrong, "; "))
	}

	local, err := getPods(s.d)
	if err != nil {
		return fmt.Errorf("GET /pods: %w", err), node
	}
	list, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		return fmt.Errorf("list the node's pods: %w", err), node
	}
	mirrors := map[string]*v1.Pod{}
	var extra []string
	s.api.orphans = nil
	for i := range list.Items {
		m := &list.Items[i]
		key := m.Namespace + "/" + m.Name
		if m.Annotations[annotationMirror] == "" {
			extra = append(extra, key+" (not a mirror pod)")
			continue
		}
		mirrors[key] = m
	}
	wrong = nil
	for i := range local {
		p := &local[i]
		key := p.Namespace + "/" + p.Name
		m := mirrors[key]
		delete(mirrors, key)
		if m == nil {
			wrong = append(wrong, key+": no mirror pod")
			continue
		}
		if err := mirrorOf(m, p, s.byFullName(p.Name)); err != nil {
			wrong = append(wrong, fmt.Sprintf("%s: %v", key, err))
		}
	}
	for key, m := range mirrors {
		s.api.orphans = append(s.api.orphans, m)
		extra = append(extra, fmt.Sprintf("%s (hash %s, static pod UID %s; mirror UID %s made %s, resourceVersion %s)", key, m.Annotations[annotationMirror],
			m.Annotations[annotationHash], m.UID, m.CreationTimestamp.UTC().Format("15:04:05"), m.ResourceVersion))
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		wrong = append(wrong, "orphan pods on the node: "+strings.Join(extra, ", "))
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%s", strings.Join(wrong, "; ")), node
	}
	return nil, node
}

// mirrorOf says how mirror m differs from the listed static pod p, of soak
// pod sp.
func mirrorOf(m, p *v1.Pod, sp *spec) error {
	if m.DeletionTimestamp != nil {
		return fmt.Errorf("its mirror pod is being deleted")
	}
	if m.Annotations[annotationMirror] != p.Annotations[annotationHash] || m.Annotations[annotationHash] != string(p.UID) {
		return fmt.Errorf("mirror of hash %s and UID %s, the static pod's are %s and %s",
			m.Annotations[annotationMirror], m.Annotations[annotationHash], p.Annotations[annotationHash], p.UID)
	}
	if p.DeletionTimestamp != nil || sp == nil {
		return nil // being stopped: its status moves
	}
	if m.Status.Phase != p.Status.Phase {
		return fmt.Errorf("mirror phase %s, the static pod's %s", m.Status.Phase, p.Status.Phase)
	}
	ms := map[string]v1.ContainerStatus{}
	for _, cs := range statuses(m) {
		ms[cs.Name] = cs
	}
	for _, cs := range statuses(p) {
		if !sp.shape.kept(cs.Name) {
			continue // a crash loop's status changes every few seconds
		}
		got, ok := ms[cs.Name]
		if !ok || got.ContainerID != cs.ContainerID || (got.State.Running == nil) != (cs.State.Running == nil) || got.RestartCount != cs.RestartCount {
			return fmt.Errorf("mirror status of %s %+v, the static pod's %+v", cs.Name, got, cs)
		}
	}
	return nil
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func leaseRenewed(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// checkNoMirrors checks, once every manifest is removed, that the API
// server holds no pod of the node.
func (s *soak) checkNoMirrors() {
	s.d.Eventually(mirrorBound, "no mirror pod left on the API server", func() error {
		list, err := s.api.c.Admin.CoreV1().Pods("").List(context.Background(),
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.d.Name).String()})
		if err != nil {
			return err
		}
		var left []string
		for _, p := range list.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		if len(left) > 0 {
			return fmt.Errorf("pods of the node left: %v", left)
		}
		return nil
	})
}
