package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestExecTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["crashy"] = 1
		rt.crash["once"] = 0
		rt.execCode = 3
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			testPod("web", "u1", v1.RestartPolicyAlways, ctr("main", "busybox"), ctr("crashy", "busybox")),
			testPod("job", "u2", v1.RestartPolicyNever, ctr("once", "busybox")),
		})

		id, err := h.a.ExecTarget("default", "web-node1", "main")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code, err := h.a.Exec(context.Background(), id, podspec.ExecSpec{Cmd: []string{"echo", "hi"}, Stdout: &out})
		if code != 3 || err != nil || out.String() != "echo hi\n" {
			t.Errorf("Exec = %d, %v, printed %q; want the runtime's 3 and output", code, err, out.String())
		}

		for _, tc := range []struct {
			ns, pod, ctr string
			want         error
			msg          string
		}{
			{"default", "nope-node1", "main", podspec.ErrNotExist, "pod default/nope-node1: does not exist"},
			{"kube-system", "web-node1", "main", podspec.ErrNotExist, "pod kube-system/web-node1: does not exist"},
			{"default", "web-node1", "nope", podspec.ErrNotExist, `pod default/web-node1 has no container "nope": does not exist`},
			{"default", "web-node1", "crashy", podspec.ErrNotRunning,
				`container "crashy" of pod default/web-node1 is not running: it is waiting (CrashLoopBackOff)`},
			{"default", "job-node1", "once", podspec.ErrNotRunning,
				`container "once" of pod default/job-node1 is not running: it is terminated (Completed, exit code 0)`},
		} {
			_, err := h.a.ExecTarget(tc.ns, tc.pod, tc.ctr)
			if !errors.Is(err, tc.want) || err.Error() != tc.msg {
				t.Errorf("ExecTarget(%s, %s, %s) = %v; want %q, wrapping %v", tc.ns, tc.pod, tc.ctr, err, tc.msg, tc.want)
			}
		}

		// ExecTargetOf, given a pod Pods listed, answers as ExecTarget.
		pods := h.a.Pods()
		if len(pods) != 2 {
			t.Fatalf("Pods listed %d pods, want 2", len(pods))
		}
		for i := range pods {
			p := &pods[i]
			for _, c := range []string{"main", "crashy", "once", "nope"} {
				want, wantErr := h.a.ExecTarget(p.Namespace, p.Name, c)
				got, err := h.a.ExecTargetOf(p, c)
				if got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) || !errors.Is(err, errors.Unwrap(wantErr)) {
					t.Errorf("ExecTargetOf(%s, %s) = %q, %v; ExecTarget says %q, %v", p.Name, c, got, err, want, wantErr)
				}
			}
		}
	})
}
