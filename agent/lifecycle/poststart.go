package lifecycle

import (
	"context"
	"iter"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// A postStart hook runs in a goroutine of its own, so that the pod's worker
// goes on publishing status, recording exits and taking updates meanwhile;
// but until it is done no other container of the pod is started, as the
// kubelet's pod worker waits for it (kuberuntime startContainer, step 4), and
// the container is neither started nor probed. A failed one has the
// container killed and restarted per restartPolicy, waiting with
// PostStartHookError.

// PostStarts are the postStart hooks of one pod worker's containers that
// run, by container ID, and the containers whose mark was looked for. It is
// used from the worker's goroutine only; a hook's end comes back on Done.
type PostStarts struct {
	marks   Marks
	logger  *slog.Logger
	running map[string]*postStart
	checked map[string]bool
	done    chan PostStartResult
	wg      sync.WaitGroup // the hooks' goroutines
}

// postStart is a postStart hook that runs.
type postStart struct {
	uid, name string
	attempt   int
	cancel    context.CancelFunc
}

// PostStartResult is how a postStart hook ended, for Finish.
type PostStartResult struct {
	run *postStart
	id  string
	msg string
	err error
}

// NewPostStarts returns the postStart hooks of a pod worker whose logger is
// logger, with marks kept in marks.
func NewPostStarts(marks Marks, logger *slog.Logger) *PostStarts {
	return &PostStarts{marks: marks, logger: logger, running: map[string]*postStart{}, checked: map[string]bool{},
		done: make(chan PostStartResult)}
}

// PostStart is one container instance's postStart hook, to run.
type PostStart struct {
	PodUID  string
	ID      string // the instance's runtime ID
	Attempt int
	Hook    *v1.LifecycleHandler
	Target  Target // Target.Container is its spec
	Pod     string // the kubelet's format.Pod
}

// HasPostStart reports whether container c has a postStart hook.
func HasPostStart(c *v1.Container) bool { return c.Lifecycle != nil && c.Lifecycle.PostStart != nil }

// Start runs postStart hook s; its end comes on Done, unless it is
// cancelled first.
func (p *PostStarts) Start(ctx context.Context, s PostStart) {
	name := s.Target.Container.Name
	ctx, cancel := context.WithCancel(ctx)
	run := &postStart{uid: s.PodUID, name: name, attempt: s.Attempt, cancel: cancel}
	p.running[s.ID] = run
	p.checked[s.ID] = true
	logger := p.logger.With("container", name, "id", s.ID)
	logger.Info("running postStart hook")
	p.wg.Go(func() {
		msg, err := Run(ctx, s.Hook, s.Target, s.Pod, logger)
		if ctx.Err() != nil {
			return // the container is being stopped, or the daemon
		}
		select {
		case p.done <- PostStartResult{run: run, id: s.ID, msg: msg, err: err}:
		case <-ctx.Done():
		}
	})
}

// Done delivers the end of each hook, for Finish on the worker's goroutine.
func (p *PostStarts) Done() <-chan PostStartResult { return p.done }

// Finished is a postStart hook that ended: its container and, when it
// failed, the kubelet's message.
type Finished struct {
	PodUID, Container, ID string
	Message               string
	Failed                bool
}

// Finish takes the end of a postStart hook. ok is false for a hook
// cancelled meanwhile. One that succeeded has its mark cleared; a failed
// one's stays: a daemon that dies before the container is killed runs the
// hook again rather than take it as started. Once the container is gone it
// matches nothing, and goes with the pod's directory.
func (p *PostStarts) Finish(r PostStartResult) (f Finished, ok bool) {
	if p.running[r.id] != r.run {
		return Finished{}, false // cancelled meanwhile
	}
	delete(p.running, r.id)
	r.run.cancel()
	f = Finished{PodUID: r.run.uid, Container: r.run.name, ID: r.id, Message: r.msg, Failed: r.err != nil}
	if !f.Failed {
		p.logger.Info("postStart hook done", "container", r.run.name, "id", r.id)
		if err := p.marks.Clear(r.run.uid, r.run.name, r.run.attempt); err != nil {
			p.logger.Warn("cannot clear postStart mark; a daemon restart runs the hook again", "container", r.run.name, "err", err)
		}
	}
	return f, true
}

// Cancel stops the postStart hook of container id, if one runs: the
// container is being stopped.
func (p *PostStarts) Cancel(id string) {
	if run := p.running[id]; run != nil {
		run.cancel()
		delete(p.running, id)
	}
}

// Forget cancels the hook of container id and forgets it was looked at: the
// container is gone.
func (p *PostStarts) Forget(id string) {
	p.Cancel(id)
	delete(p.checked, id)
}

// Running reports whether the postStart hook of container id runs.
func (p *PostStarts) Running(id string) bool { return p.running[id] != nil }

// PodRunning reports whether a postStart hook of pod uid runs.
func (p *PostStarts) PodRunning(uid string) bool {
	for _, run := range p.running {
		if run.uid == uid {
			return true
		}
	}
	return false
}

// All yields the container ID and pod UID of each hook that runs.
func (p *PostStarts) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for id, run := range p.running {
			if !yield(id, run.uid) {
				return
			}
		}
	}
}

// Check reports whether container id is yet to be looked at for a hook a
// daemon restart cut short, and counts it as looked at: each container is
// looked at once.
func (p *PostStarts) Check(id string) bool {
	if p.running[id] != nil || p.checked[id] {
		return false
	}
	p.checked[id] = true
	return true
}

// CutShort reports whether the postStart hook of the container of pod uid
// named name, at attempt, was marked and not done: a daemon died during it.
func (p *PostStarts) CutShort(uid, name string, attempt int) bool {
	return p.marks.Marked(uid, name, attempt)
}

// Stop cancels every hook that runs and joins their goroutines: the pod
// worker returns.
func (p *PostStarts) Stop() {
	for id := range p.running {
		p.Cancel(id)
	}
	p.wg.Wait()
}
