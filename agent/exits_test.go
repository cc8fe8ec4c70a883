package agent

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// Each exit of a crash-looping container is logged with its code and
// reason, its restart count and when it will be restarted.
func TestExitLogOfACrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["a"] = 1
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		time.Sleep(time.Minute)
		synctest.Wait()
		logs := h.logs.String()
		for _, want := range []string{
			`level=WARN msg="container exited" pod=default/web-node1 container=a id=c1 exitCode=1 reason=Error restartCount=0 restart=now`,
			`level=WARN msg="container exited" pod=default/web-node1 container=a id=c2 exitCode=1 reason=Error restartCount=1 restart="in 10s"`,
			`level=WARN msg="container exited" pod=default/web-node1 container=a id=c3 exitCode=1 reason=Error restartCount=2 restart="in 20s"`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %q:\n%s", want, logs)
			}
		}
	})
}

// A container killed by a signal says which; one the agent stopped is not a
// warning and is not restarted.
func TestExitLogNamesSignalAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox")),
			testPod("job", "u2", v1.RestartPolicyNever, ctr("b", "busybox")),
		})
		id := func(name string) string {
			return strings.TrimPrefix(h.pod(name).Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		}
		job, web := id("job"), id("web")
		rt.Exit(job, 137)
		synctest.Wait()
		h.send([]manifest.Pod{testPod("job", "u2", v1.RestartPolicyNever, ctr("b", "busybox"))})
		logs := h.logs.String()
		for _, want := range []string{
			`level=WARN msg="container exited" pod=default/job-node1 container=b id=` + job +
				` exitCode=137 reason=Error signal=SIGKILL restartCount=0 restart="no: restartPolicy Never"`,
			`level=INFO msg="container exited" pod=default/web-node1 container=a id=` + web +
				` exitCode=143 reason=Error signal=SIGTERM restartCount=0 restart="no: the pod is being removed or replaced"`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %q:\n%s", want, logs)
			}
		}
	})
}
