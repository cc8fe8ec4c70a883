package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// followManifest is pod name following the tag of image every 10s (the
// shortest interval), rolled back when a generation is not Ready in 8s.
func followManifest(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  annotations:
    staticpodd.io/follow-tags: 10s
    staticpodd.io/rollback-after: 8s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
`, name, image)
}

// awaitImage waits until pod name has one live generation, not among old,
// whose container runs imageID, and returns its UID.
func awaitImage(d *testdaemon.Daemon, name, imageID string, timeout time.Duration, old ...string) string {
	d.T.Helper()
	var uid string
	d.Eventually(timeout, name+" running "+imageID, func() error {
		live := livePods(d, name)
		if len(live) != 1 {
			return fmt.Errorf("%d live generations", len(live))
		}
		cs := statusOf(&live[0])
		for _, o := range old {
			if string(live[0].UID) == o {
				return fmt.Errorf("still generation %s, image %s", o, cs.ImageID)
			}
		}
		if cs.State.Running == nil || cs.ImageID != imageID {
			return fmt.Errorf("generation %s: image %s, imageID %s, state %+v", live[0].UID, cs.Image, cs.ImageID, cs.State)
		}
		uid = string(live[0].UID)
		return nil
	})
	return uid
}

// A pod that follows its tag runs each new digest the tag names as a new
// generation, by digest; one that is not Ready in time is rolled back to
// the digest that was, and not followed again until the tag moves on; a
// daemon restart keeps what runs; a registry that hangs for one pod holds
// back no other.
func TestFollowTagRollsOutAndBack(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	tar := func(n, cmd string) string {
		p := filepath.Join(d.Dir, n+".tar")
		buildImage(t, p, "-ref", "app:"+n, "-cmd", cmd)
		return p
	}
	aTar, bTar, cTar := tar("a", loopCmd("A")), tar("b", loopCmd("B")), tar("c", "sh,-c,echo C; exit 4")
	dTar := tar("d", loopCmd("D"))
	_, refA := r.push(aTar, "team/app:t")
	r.push(aTar, "team/stuck:t")
	d.Start()
	image := r.addr + "/team/app:t"
	d.WriteManifest("web.yaml", followManifest("web", image))
	d.WriteManifest("stuck.yaml", followManifest("stuck", r.addr+"/team/stuck:t"))
	uidA := awaitImage(d, "web", refA, 60*time.Second)
	d.WaitRunning("stuck", 60*time.Second)
	d.Eventually(20*time.Second, "generation A passes its rollout", func() error {
		if out := d.CLI("rollout", "status", "web"); !strings.HasPrefix(out, "ready:") {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})
	// From now on the registry hangs for pod stuck's repository.
	hang := "/team/stuck/"
	r.hang.Store(&hang)

	_, refB := r.push(bTar, "team/app:t")
	uidB := awaitImage(d, "web", refB, 60*time.Second, uidA)
	if cs := statusOf(d.Pod("web")); cs.Image != refB {
		t.Errorf("the new generation runs image %s, want the digest %s", cs.Image, refB)
	}
	if !strings.Contains(d.CLI("logs", "web", "-c", "main"), "B") {
		t.Errorf("the new generation did not run B")
	}
	d.Eventually(20*time.Second, "the event of the new digest", func() error {
		if ev := d.CLI("events"); !strings.Contains(ev, "Following tag "+image+": new digest "+refB) {
			return fmt.Errorf("events:\n%s", ev)
		}
		return nil
	})
	d.Eventually(20*time.Second, "generation B passes its rollout", func() error {
		if out := d.CLI("rollout", "status", "web"); !strings.HasPrefix(out, "ready:") || !strings.Contains(out, uidB) {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})

	_, refC := r.push(cTar, "team/app:t")
	d.Eventually(60*time.Second, "C rolled back", func() error {
		if ev := d.CLI("events"); !strings.Contains(ev, "new digest "+refC) || !strings.Contains(ev, "RolledBack") {
			return fmt.Errorf("events:\n%s", ev)
		}
		return nil
	})
	awaitImage(d, "web", refB, 30*time.Second)
	if got := awaitImage(d, "web", refB, time.Second); got != uidB {
		t.Errorf("rolled back to generation %s, want B's %s", got, uidB)
	}
	if history := d.CLI("rollout", "history", "web"); !strings.Contains(history, "exit code 4") || !strings.Contains(history, refB) {
		t.Errorf("rollout history:\n%s", history)
	}

	// C is not followed again: two more checks of the tag leave B running.
	heads := r.heads.Load()
	d.Eventually(40*time.Second, "two more checks of the tag", func() error {
		if n := r.heads.Load() - heads; n < 2 {
			return fmt.Errorf("%d checks", n)
		}
		return nil
	})
	if got := awaitImage(d, "web", refB, time.Second); got != uidB {
		t.Errorf("after more checks generation %s runs, want B's %s", got, uidB)
	}
	if ev := d.CLI("events"); strings.Count(ev, "new digest "+refC) != 1 {
		t.Errorf("C followed more than once:\n%s", ev)
	}

	d.Stop()
	d.Start()
	if got := awaitImage(d, "web", refB, 30*time.Second); got != uidB {
		t.Errorf("after a restart generation %s runs, want B's %s", got, uidB)
	}

	// The tag moves on: D runs, the file is no longer flagged.
	_, refD := r.push(dTar, "team/app:t")
	awaitImage(d, "web", refD, 60*time.Second, uidB)
	if ev := d.CLI("events"); strings.Contains(ev, "new digest "+refC) {
		t.Errorf("C followed again after the restart:\n%s", ev)
	}
	// Pod stuck, whose registry hangs, still runs its image, untouched.
	if cs := statusOf(d.Pod("stuck")); cs.State.Running == nil || cs.RestartCount != 0 {
		t.Errorf("pod stuck: %+v", cs)
	}
	r.hang.Store(nil)
	d.RemoveManifest("web.yaml")
	d.RemoveManifest("stuck.yaml")
	d.Eventually(30*time.Second, "pods removed", func() error {
		if len(d.Pods()) > 0 {
			return errStill
		}
		return nil
	})
	d.Stop()
	d.AssertNoLeaks()
}

// A kill -9 of the daemon just after a followed tag moved loses neither
// the new digest nor the generation: the next daemon runs B once, and
// rolls it out no second time.
func TestFollowTagAcrossKill9(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	aTar, bTar := filepath.Join(d.Dir, "a.tar"), filepath.Join(d.Dir, "b.tar")
	buildImage(t, aTar, "-ref", "app:a", "-cmd", loopCmd("A"))
	buildImage(t, bTar, "-ref", "app:b", "-cmd", loopCmd("B"))
	_, refA := r.push(aTar, "team/app:t")
	d.Start()
	d.WriteManifest("web.yaml", followManifest("web", r.addr+"/team/app:t"))
	uidA := awaitImage(d, "web", refA, 60*time.Second)
	_, refB := r.push(bTar, "team/app:t")
	d.WaitLine(30*time.Second, "followed tag moved")
	d.Kill9()
	d.Start()
	uidB := awaitImage(d, "web", refB, 60*time.Second, uidA)
	heads := r.heads.Load()
	d.Eventually(40*time.Second, "two more checks of the tag", func() error {
		if n := r.heads.Load() - heads; n < 2 {
			return fmt.Errorf("%d checks", n)
		}
		return nil
	})
	if got := awaitImage(d, "web", refB, time.Second); got != uidB {
		t.Errorf("generation %s runs after more checks, want %s", got, uidB)
	}
	if strings.Contains(d.Output(), "followed tag moved") {
		t.Errorf("the next daemon rolled the tag's move out again:\n%s", d.Output())
	}
	d.RemoveManifest("web.yaml")
	d.Eventually(30*time.Second, "web removed", func() error {
		if len(d.Pods()) > 0 {
			return errStill
		}
		return nil
	})
	d.Stop()
	d.AssertNoLeaks()
}
