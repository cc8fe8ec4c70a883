package agent

import (
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

func TestMergeDuplicates(t *testing.T) {
	at := func(p manifest.Pod, src, origin string) manifest.Pod {
		p.Source, p.Origin = src, origin
		return p
	}
	web := func(uid string) manifest.Pod { return testPod("web", uid, v1.RestartPolicyAlways, ctr("a", "busybox")) }
	for _, tc := range []struct {
		name     string
		updates  map[string]source.Update
		running  map[string]bool
		wantUID  string
		problems []string // origins with a problem
	}{
		{
			name: "two files: the first by name wins",
			updates: map[string]source.Update{manifest.SourceFile: {Pods: []manifest.Pod{
				at(web("u2"), "file", "/m/web2.yaml"), at(web("u1"), "file", "/m/web.yaml"),
			}}},
			wantUID:  "u1",
			problems: []string{"/m/web2.yaml"},
		},
		{
			name: "two files: the running one wins",
			updates: map[string]source.Update{manifest.SourceFile: {Pods: []manifest.Pod{
				at(web("u2"), "file", "/m/web2.yaml"), at(web("u1"), "file", "/m/web.yaml"),
			}}},
			running:  map[string]bool{"u2": true},
			wantUID:  "u2",
			problems: []string{"/m/web.yaml"},
		},
		{
			name: "file and URL",
			updates: map[string]source.Update{
				manifest.SourceFile: {Pods: []manifest.Pod{at(web("u1"), "file", "/m/web.yaml")}},
				manifest.SourceHTTP: {Pods: []manifest.Pod{at(web("u2"), "http", "http://127.0.0.1/pods")}},
			},
			wantUID:  "u1",
			problems: []string{"http://127.0.0.1/pods"},
		},
		{
			name: "source problems pass through",
			updates: map[string]source.Update{manifest.SourceFile: {
				Pods:     []manifest.Pod{at(web("u1"), "file", "/m/web.yaml")},
				Problems: []manifest.Problem{{Origin: "/m/bad.yaml", Err: errString("bad")}},
			}},
			wantUID:  "u1",
			problems: []string{"/m/bad.yaml"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, problems := merge(tc.updates, tc.running)
			if len(pods) != 1 || string(pods["default/web-node1"].UID) != tc.wantUID {
				t.Fatalf("pods = %v, want only web with UID %s", pods, tc.wantUID)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems = %v, want for %v", problems, tc.problems)
			}
			for i, p := range problems {
				if p.Origin != tc.problems[i] {
					t.Errorf("problem %d origin = %s, want %s", i, p.Origin, tc.problems[i])
				}
			}
			if tc.name != "source problems pass through" {
				msg := problems[0].Err.Error()
				kept := pods["default/web-node1"].Origin
				if !strings.Contains(msg, kept) || !strings.Contains(msg, problems[0].Origin) || !strings.Contains(msg, "default/web-node1") {
					t.Errorf("duplicate error %q does not name the pod and both origins", msg)
				}
			}
		})
	}
}

// Two pods of different names with one metadata.uid (a manifest may set
// its own) would share one sandbox, network attachment and cgroup: only one
// is kept, the one whose worker runs that UID, else the first by origin,
// and the other is a problem naming both, whichever source each came from.
func TestSameUIDTwoNames(t *testing.T) {
	web := testPod("web", "same", v1.RestartPolicyAlways, ctr("a", "busybox"))
	db := testPod("db", "same", v1.RestartPolicyAlways, ctr("a", "busybox"))
	web.Source, web.Origin = "file", "/m/web.yaml"
	db.Source, db.Origin = "http", "http://127.0.0.1/pods"
	for _, tc := range []struct {
		workers       map[string]string
		kept, dropped manifest.Pod
	}{
		{nil, web, db},
		{map[string]string{"default/db-node1": "same"}, db, web},
		{map[string]string{"default/db-node1": "other"}, web, db},
	} {
		pods, problems := merge(map[string]source.Update{
			manifest.SourceFile: {Pods: []manifest.Pod{web}},
			manifest.SourceHTTP: {Pods: []manifest.Pod{db}},
		}, nil)
		problems = append(problems, dropSharedUIDs(pods, tc.workers)...)
		keptName, droppedName := fullName(tc.kept), fullName(tc.dropped)
		if len(pods) != 1 || pods[keptName].Pod == nil {
			t.Fatalf("workers %v: pods = %v, want only %s", tc.workers, slices.Sorted(maps.Keys(pods)), keptName)
		}
		if len(problems) != 1 || problems[0].Origin != tc.dropped.Origin {
			t.Fatalf("workers %v: problems = %v, want one for %s", tc.workers, problems, tc.dropped.Origin)
		}
		if msg := problems[0].Err.Error(); !strings.Contains(msg, keptName) || !strings.Contains(msg, droppedName) ||
			!strings.Contains(msg, tc.kept.Origin) || !strings.Contains(msg, "same") {
			t.Errorf("same-UID error %q does not name both pods, the kept one's origin and the UID", msg)
		}
	}
}
