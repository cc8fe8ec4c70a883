package poddir

import "testing"

// The layout is on disk across daemon versions (a daemon adopts what an
// older one left): every name stays what it was, the kubelet's where it has
// one.
func TestLayout(t *testing.T) {
	r := Root("/var/lib/staticpodd")
	for _, tc := range []struct{ got, want string }{
		{r.Pods(), "/var/lib/staticpodd/pods"},
		{r.Pod("u1"), "/var/lib/staticpodd/pods/u1"},
		{r.EmptyDirs("u1"), "/var/lib/staticpodd/pods/u1/volumes/kubernetes.io~empty-dir"},
		{r.EmptyDir("u1", "data"), "/var/lib/staticpodd/pods/u1/volumes/kubernetes.io~empty-dir/data"},
		{r.DownwardAPI("u1", "info"), "/var/lib/staticpodd/pods/u1/volumes/kubernetes.io~downward-api/info"},
		{r.Seen("u1"), "/var/lib/staticpodd/pods/u1/seen"},
		{r.Started("u1"), "/var/lib/staticpodd/pods/u1/started"},
		{r.Manifest("u1"), "/var/lib/staticpodd/pods/u1/manifest.json"},
		{r.PostStartMark("u1", "web", 3), "/var/lib/staticpodd/pods/u1/poststart/web.3"},
		{r.ProbeMark("u1", "c0ffee", "ready"), "/var/lib/staticpodd/pods/u1/probes/c0ffee.ready"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
}
