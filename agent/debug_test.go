package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A debug container runs in the pod's sandbox with the target's runtime ID,
// shows in the pod's spec and status while it runs, as the kubelet shows an
// ephemeral container, and its exit code comes back; the pod is not
// touched.
func TestDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		release := make(chan struct{})
		rt.debugFunc = func(ctx context.Context) (int, error) {
			<-release
			return 42, nil
		}
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("main", "busybox"))})
		before := h.pod("web")
		target := strings.TrimPrefix(before.Status.ContainerStatuses[0].ContainerID, containerIDPrefix)

		run, err := h.a.Debug("default", "web-node1", podspec.DebugRequest{Image: "tools:1", Target: "main", Cmd: []string{"sh"}, Stdin: true, TTY: true})
		if err != nil {
			t.Fatal(err)
		}
		if es := h.pod("web").Status.EphemeralContainerStatuses; len(es) != 1 || es[0].State.Waiting == nil ||
			es[0].State.Waiting.Reason != "ContainerCreating" || es[0].ContainerID != "" {
			t.Errorf("debug container before it runs: %+v, want waiting with ContainerCreating", es)
		}
		done := make(chan int)
		go func() {
			code, err := run(context.Background(), podspec.ExecSpec{})
			if err != nil {
				t.Error(err)
			}
			done <- code
		}()
		synctest.Wait()
		p := h.pod("web")
		ec, es := p.Spec.EphemeralContainers, p.Status.EphemeralContainerStatuses
		if len(ec) != 1 || len(es) != 1 || !strings.HasPrefix(ec[0].Name, debugContainerPrefix) || len(ec[0].Name) != len(debugContainerPrefix)+5 ||
			ec[0].Image != "tools:1" || ec[0].TargetContainerName != "main" || !ec[0].Stdin || !ec[0].TTY || ec[0].ImagePullPolicy != v1.PullIfNotPresent ||
			es[0].Name != ec[0].Name || es[0].State.Running == nil || es[0].Ready || es[0].ContainerID != containerIDPrefix+"debug-"+ec[0].Name {
			t.Errorf("ephemeral containers %+v, statuses %+v", ec, es)
		}
		if p.UID != before.UID || p.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("the pod changed: %+v", p.Status.ContainerStatuses)
		}
		if got, want := rt.Calls("debug "), []string{"debug u1 " + ec[0].Name + " tools:1 target=" + target + " sh"}; !slices.Equal(got, want) {
			t.Errorf("runtime calls %q, want %q", got, want)
		}
		var got []string
		for _, e := range h.a.Events().List() {
			if e.InvolvedObject.FieldPath == "spec.ephemeralContainers{"+ec[0].Name+"}" {
				got = append(got, e.Reason+": "+e.Message)
			}
		}
		if want := []string{`Pulled: Container image "tools:1" already present on machine`, "Created: Container created", "Started: Container started"}; !slices.Equal(got, want) {
			t.Errorf("the debug container's events %q, want %q", got, want)
		}
		close(release)
		if code := <-done; code != 42 {
			t.Errorf("exit code %d, want 42", code)
		}
		if p := h.pod("web"); len(p.Status.EphemeralContainerStatuses) != 0 || len(p.Spec.EphemeralContainers) != 0 {
			t.Errorf("ended debug container still shown: %+v", p.Status.EphemeralContainerStatuses)
		}
	})
}

// Requests that cannot run are refused before anything is taken.
func TestDebugRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["crashy"] = 1
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("main", "busybox"), ctr("crashy", "busybox"))})
		many := make([]string, MaxDebugArgs+1)
		for i := range many {
			many[i] = "x"
		}
		for _, tc := range []struct {
			pod  string
			req  podspec.DebugRequest
			want error
		}{
			{"web-node1", podspec.DebugRequest{Image: "busybox"}, podspec.ErrDebugInvalid},
			{"web-node1", podspec.DebugRequest{Cmd: []string{"sh"}}, podspec.ErrDebugInvalid},
			{"web-node1", podspec.DebugRequest{Image: "Not A Reference", Cmd: []string{"sh"}}, podspec.ErrDebugInvalid},
			{"web-node1", podspec.DebugRequest{Image: "busybox", Cmd: many}, podspec.ErrDebugInvalid},
			{"web-node1", podspec.DebugRequest{Image: "busybox", Cmd: []string{strings.Repeat("x", MaxDebugArgBytes+1)}}, podspec.ErrDebugInvalid},
			{"nope-node1", podspec.DebugRequest{Image: "busybox", Cmd: []string{"sh"}}, podspec.ErrNotExist},
			{"web-node1", podspec.DebugRequest{Image: "busybox", Target: "nope", Cmd: []string{"sh"}}, podspec.ErrNotExist},
			{"web-node1", podspec.DebugRequest{Image: "busybox", Target: "crashy", Cmd: []string{"sh"}}, podspec.ErrNotRunning},
		} {
			if _, err := h.a.Debug("default", tc.pod, tc.req); !errors.Is(err, tc.want) {
				t.Errorf("Debug(%s, %+v) = %v, want %v", tc.pod, tc.req, err, tc.want)
			}
		}
		if rt.Calls("debug") != nil || h.a.debugs.n != 0 {
			t.Errorf("refused requests ran or took slots: %q, %d", rt.Calls("debug"), h.a.debugs.n)
		}
	})
}

// A pod runs at most MaxDebugPerPod debug containers, the node
// MaxDebugPerNode; a slot is free again once its container is gone, or its
// run was given up (a client that left before it began).
func TestDebugLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		var pods []manifest.Pod
		for i := range MaxDebugPerNode/MaxDebugPerPod + 1 {
			name := "p" + string(rune('a'+i))
			pods = append(pods, testPod(name, "u"+name, v1.RestartPolicyAlways, ctr("main", "busybox")))
		}
		h.send(pods)
		req := podspec.DebugRequest{Image: "busybox", Cmd: []string{"sh"}}
		var runs []func(context.Context, podspec.ExecSpec) (int, error)
		for i := range MaxDebugPerNode {
			pod := pods[i/MaxDebugPerPod].Pod.Name
			if i%MaxDebugPerPod == 0 && i > 0 {
				// The previous pod is full.
				prev := pods[i/MaxDebugPerPod-1].Pod.Name
				if _, err := h.a.Debug("default", prev, req); !errors.Is(err, podspec.ErrDebugLimit) {
					t.Errorf("debug container %d of %s: %v, want ErrDebugLimit", MaxDebugPerPod+1, prev, err)
				}
			}
			run, err := h.a.Debug("default", pod, req)
			if err != nil {
				t.Fatalf("debug container %d: %v", i, err)
			}
			runs = append(runs, run)
		}
		last := pods[len(pods)-1].Pod.Name
		if _, err := h.a.Debug("default", last, req); !errors.Is(err, podspec.ErrDebugLimit) {
			t.Errorf("debug container %d of the node: %v, want ErrDebugLimit", MaxDebugPerNode+1, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := runs[0](ctx, podspec.ExecSpec{}); err == nil {
			t.Error("a run with its context ended succeeded")
		}
		if _, err := h.a.Debug("default", last, req); err != nil {
			t.Errorf("a slot given back is not free again: %v", err)
		}
	})
}

// A pod removed while a debug container runs takes it with it, before its
// sandbox: the debug container's cgroup is under the pod's.
func TestDebugPodRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.debugFunc = func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return -1, context.Cause(ctx)
		}
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("main", "busybox"))})
		run, err := h.a.Debug("default", "web-node1", podspec.DebugRequest{Image: "busybox", Cmd: []string{"sh"}})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error)
		go func() {
			_, err := run(context.Background(), podspec.ExecSpec{})
			errc <- err
		}()
		synctest.Wait()
		h.send(nil)
		if err := <-errc; !errors.Is(err, errPodRemoved) {
			t.Errorf("debug of a removed pod: %v, want errPodRemoved", err)
		}
		synctest.Wait()
		calls := rt.Calls("debugged", "rmsandbox")
		if len(calls) != 2 || !strings.HasPrefix(calls[0], "debugged u1") || calls[1] != "rmsandbox u1" {
			t.Errorf("runtime calls %q, want the debug container gone before the sandbox", calls)
		}
	})
}
