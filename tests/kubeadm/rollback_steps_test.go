//go:build kubeadm

package kubeadm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The kubeadm manifest's lines the steps below edit, as kubeadm writes them.
const (
	apiserverManifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	// rollbackAfter is the deadline the operator gives the API server's new
	// generations: long enough for its start on this loaded machine.
	rollbackAfter = 60 * time.Second
)

// rollbackSteps is issue 28's scenario on kubeadm's control plane: the
// operator gives kube-apiserver a rollback deadline, then a bad edit (an
// unknown flag) stops it; staticpodd brings the last Ready generation back
// within the deadline plus the API server's start time, and says why.
func rollbackSteps(t *testing.T, m *Machine) {
	t.Helper()
	ready := func() bool {
		_, err := m.ShErr(30*time.Second, "kubectl get --raw=/readyz")
		return err == nil
	}
	// waitFor polls cond until it holds, at most timeout; polling is what an
	// operator does too, and the API server has nothing to wait on instead.
	waitFor := func(what string, timeout time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > timeout {
				t.Fatalf("%s: not after %s\n%s\n%s", what, timeout, m.Sh(time.Minute, "staticpodd ps -o wide; staticpodd rollout history kube-apiserver"), m.Log())
			}
			time.Sleep(time.Second)
		}
		return time.Since(start)
	}
	status := func() (string, error) {
		return m.ShErr(30*time.Second, "staticpodd rollout status kube-apiserver")
	}

	// The annotation is an edit: a new generation, which must be Ready,
	// and stay Ready to its deadline to be one a rollback can go back to.
	before := apiserverUID(t, m)
	m.Sh(time.Minute, `sed -i 's|^  annotations:$|  annotations:\n    staticpodd.io/rollback-after: `+rollbackAfter.String()+`|' `+apiserverManifest)
	m.Sh(time.Minute, "grep -q 'staticpodd.io/rollback-after' "+apiserverManifest)
	var good string
	startTime := waitFor("kube-apiserver's new generation serving", 5*time.Minute, func() bool {
		good = apiserverUID(t, m)
		return good != "" && good != before && ready()
	})
	passed := waitFor("kube-apiserver's new generation past its rollback deadline", rollbackAfter+time.Minute, func() bool {
		out, err := status()
		return err == nil && strings.HasPrefix(out, "ready")
	})
	t.Logf("FIGURE kube-apiserver's new generation: serving %.1fs after the annotation's edit, rollout status ready %.1fs later", startTime.Seconds(), passed.Seconds())

	// The bad edit: a flag kube-apiserver does not know. It exits at once,
	// and again at each restart, never Ready.
	m.Sh(time.Minute, `sed -i 's|^    - kube-apiserver$|    - kube-apiserver\n    - --no-such-flag=1|' `+apiserverManifest)
	took := waitFor("kube-apiserver rolled back and serving", rollbackAfter+startTime+2*time.Minute, func() bool {
		out, err := status()
		return err != nil && strings.Contains(out, "rolled back") && ready()
	})
	t.Logf("FIGURE bad edit of kube-apiserver.yaml to the old generation serving again: %.1fs (rollback-after %s, start %.1fs)",
		took.Seconds(), rollbackAfter, startTime.Seconds())
	if limit := rollbackAfter + startTime + 30*time.Second; took > limit {
		t.Errorf("the old generation served again after %s, want within the deadline plus its start time (%s)", took, limit)
	}
	if uid := apiserverUID(t, m); uid != good {
		t.Errorf("kube-apiserver runs generation %s after the rollback, want the last Ready one %s", uid, good)
	}
	events := m.Sh(time.Minute, "staticpodd events")
	var rolled string
	for _, l := range strings.Split(events, "\n") {
		if strings.Contains(l, "RolledBack") && strings.Contains(l, "kube-apiserver") {
			rolled = l
		}
	}
	if rolled == "" || !strings.Contains(rolled, "exit") {
		t.Errorf("no RolledBack event for kube-apiserver naming its exit code:\n%s", events)
	}
	t.Logf("%s$ staticpodd events | grep RolledBack\n%s", m.Name, rolled)
	ps := m.Sh(time.Minute, "staticpodd ps -o wide kube-apiserver")
	if !strings.Contains(ps, "rolled back") {
		t.Errorf("staticpodd ps -o wide does not flag kube-apiserver's file as rolled back:\n%s", ps)
	}
	t.Logf("%s$ staticpodd ps -o wide kube-apiserver\n%s", m.Name, ps)
	t.Logf("%s$ staticpodd rollout history kube-apiserver\n%s", m.Name, m.Sh(time.Minute, "staticpodd rollout history kube-apiserver"))

	// The operator takes the flag out: the file is the Ready generation's
	// again, the flag on it goes, and nothing restarts.
	m.Sh(time.Minute, `sed -i '/^    - --no-such-flag=1$/d' `+apiserverManifest)
	waitFor("kube-apiserver's file no longer flagged", time.Minute, func() bool {
		out, err := status()
		return err == nil && strings.HasPrefix(out, "ready")
	})
	if uid := apiserverUID(t, m); uid != good {
		t.Errorf("kube-apiserver runs generation %s after the file was fixed, want %s unchanged", uid, good)
	}
}

// apiserverUID is the UID of the kube-apiserver pod staticpodd runs: its
// generation; "" while it runs none.
func apiserverUID(t *testing.T, m *Machine) string {
	t.Helper()
	var list v1.PodList
	out, err := m.ShErr(time.Minute, "staticpodd ps kube-apiserver -o json")
	if err != nil {
		return "" // no pod of that name
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("staticpodd ps kube-apiserver -o json: %v\n%s", err, out)
	}
	if len(list.Items) != 1 {
		return ""
	}
	return string(list.Items[0].UID)
}
