package hostile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// TestHostileImageConfigStrings runs images whose Entrypoint, WorkingDir or
// User is tens of KiB or a MiB long: strings libcontainer and the spec's
// checks quote in the error that keeps the container from starting. A MiB
// entrypoint used to leave the container's init blocked writing its error
// and the pod stuck creating, never removed. Each pod must fail at once, say
// why in its status in a few KiB, and cost the daemon's log a few KiB.
func TestHostileImageConfigStrings(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	base := busybox(t, testdaemon.Image)
	long := func(prefix string, n int) string { return prefix + strings.Repeat("a", n) }
	cases := map[string]struct {
		edit func(*v1.Config)
		want string // the status message begins with the value: this much of it
	}{
		"entry-mid": {func(c *v1.Config) { c.Entrypoint, c.Cmd = []string{long("/entry-mid-", 48<<10)}, nil }, "/entry-mid-aaaa"},
		"entry-big": {func(c *v1.Config) { c.Entrypoint, c.Cmd = []string{long("/entry-big-", 1<<20)}, nil }, "/entry-big-aaaa"},
		"wd-abs":    {func(c *v1.Config) { c.WorkingDir = long("/wd-abs-", 1<<20) }, "/wd-abs-aaaa"},
		"wd-rel":    {func(c *v1.Config) { c.WorkingDir = long("wd-rel-", 1<<20) }, "wd-rel-aaaa"},
		"user":      {func(c *v1.Config) { c.User = long("user-", 1<<20) }, "user-aaaa"},
	}
	for name, tc := range cases {
		importImage(t, d, "hostile/"+name+":v1", imageOf(t, base, tc.edit))
	}
	d.Start()
	startLog := len(d.Output())
	for name := range cases {
		d.WriteManifest(name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - {name: main, image: "hostile/%s:v1"}
`, name, name))
	}
	for name, tc := range cases {
		st := waitState(t, d, name, 30*time.Second, "refused or failed", func(st corev1.ContainerState) error {
			if st.Terminated == nil && (st.Waiting == nil || st.Waiting.Reason == "ContainerCreating") {
				return fmt.Errorf("state %+v", st)
			}
			return nil
		})
		reason, msg := "", ""
		if st.Terminated != nil {
			reason, msg = st.Terminated.Reason, st.Terminated.Message
		} else {
			reason, msg = st.Waiting.Reason, st.Waiting.Message
		}
		t.Logf("%s: %s, %d bytes: %.300s", name, reason, len(msg), msg)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: the status does not show the value that failed: %.300s", name, msg)
		}
		if len(msg) > 4<<10 {
			t.Errorf("%s: the status message is %d bytes, want at most 4 KiB", name, len(msg))
		}
	}
	logBytes := len(d.Output()) - startLog
	t.Logf("the daemon's log grew by %d bytes for %d pods", logBytes, len(cases))
	if logBytes > len(cases)*(16<<10) {
		t.Errorf("the daemon's log grew by %d bytes for %d pods, want under 16 KiB each", logBytes, len(cases))
	}
	for name := range cases {
		d.RemoveManifest(name + ".yaml")
	}
	d.Eventually(60*time.Second, "the pods are gone", func() error {
		if n := len(d.Pods()); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
}
