package lifecycle

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// memMarks are postStart marks in memory.
type memMarks map[string]bool

func (m memMarks) Mark(uid, name string, attempt int) error  { m[uid+"/"+name] = true; return nil }
func (m memMarks) Clear(uid, name string, attempt int) error { delete(m, uid+"/"+name); return nil }
func (m memMarks) Marked(uid, name string, attempt int) bool { return m[uid+"/"+name] }

func execHook(cmd string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{cmd}}}
}

// A hook that succeeds clears its mark; one that fails keeps it; one
// cancelled meanwhile is not finished; Stop joins a hook that still runs.
func TestPostStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exec := func(ctx context.Context, cmd []string, _, _ io.Writer) (int, error) {
			switch cmd[0] {
			case "fail":
				return 1, nil
			case "hang":
				<-ctx.Done()
				return -1, ctx.Err()
			}
			return 0, nil
		}
		marks := memMarks{"u1/ok": true, "u1/bad": true, "u1/slow": true}
		p := NewPostStarts(marks, quiet)
		start := func(name, id, cmd string) {
			p.Start(t.Context(), PostStart{PodUID: "u1", ID: id, Hook: execHook(cmd), Pod: pod,
				Target: Target{Container: &v1.Container{Name: name}, Exec: exec}})
		}
		start("ok", "c-ok", "true")
		if !p.Running("c-ok") || !p.PodRunning("u1") || p.PodRunning("u2") || p.Check("c-ok") {
			t.Fatal("a hook that runs: not Running, or Checked again")
		}
		if f, ok := p.Finish(<-p.Done()); !ok || f.Failed || f.ID != "c-ok" || marks["u1/ok"] {
			t.Errorf("success: %+v %v, marks %v", f, ok, marks)
		}
		start("bad", "c-bad", "fail")
		if f, ok := p.Finish(<-p.Done()); !ok || !f.Failed || f.Container != "bad" || f.Message == "" || !marks["u1/bad"] {
			t.Errorf("failure: %+v %v, marks %v", f, ok, marks)
		}
		if p.PodRunning("u1") {
			t.Error("PodRunning after both ended")
		}
		start("slow", "c-slow", "hang")
		p.Cancel("c-slow")
		synctest.Wait()
		select {
		case r := <-p.Done():
			t.Errorf("cancelled hook delivered %+v", r)
		default:
		}
		start("slow", "c-slow2", "hang")
		p.Stop()
		if p.Running("c-slow2") {
			t.Error("Running after Stop")
		}
		p.Forget("c-ok")
		if !p.Check("c-ok") || p.Check("c-ok") {
			t.Error("Check: a forgotten container is looked at again, once")
		}
	})
}

// A preStop hook is cut by its grace period, ends early when the container
// exits, and tells of its failure.
func TestPreStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exited := make(chan struct{})
		failed := 0
		exec := func(ctx context.Context, cmd []string, _, _ io.Writer) (int, error) {
			if cmd[0] == "fail" {
				return 1, nil
			}
			<-ctx.Done()
			return -1, ctx.Err()
		}
		pre := func(cmd string) *PreStop {
			return &PreStop{Hook: execHook(cmd), Target: Target{Container: &v1.Container{Name: "app"}, Exec: exec}, Pod: pod, Logger: quiet,
				Wait: func(ctx context.Context) (podspec.ContainerStatus, error) {
					select {
					case <-exited:
						return podspec.ContainerStatus{ExitCode: 143}, nil
					case <-ctx.Done():
						return podspec.ContainerStatus{}, errors.New("cancelled")
					}
				},
				Failed: func() { failed++ }}
		}
		began := time.Now()
		if _, exit := pre("hang").Run(t.Context(), "c1", 5*time.Second); exit || time.Since(began) != 5*time.Second || failed != 0 {
			t.Errorf("cut by grace: exited %v after %v, failed %d", exit, time.Since(began), failed)
		}
		if _, exit := pre("fail").Run(t.Context(), "c1", 5*time.Second); exit || failed != 1 {
			t.Errorf("failing: exited %v, failed %d", exit, failed)
		}
		go func() {
			time.Sleep(time.Second)
			close(exited)
		}()
		began = time.Now()
		st, exit := pre("hang").Run(t.Context(), "c1", 5*time.Second)
		if !exit || st.ID != "c1" || st.State != podspec.StateExited || st.ExitCode != 143 || time.Since(began) != time.Second {
			t.Errorf("container exited during it: %+v %v after %v", st, exit, time.Since(began))
		}
	})
}
