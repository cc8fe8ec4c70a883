package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// A file pod and a URL pod with the same full name: one runs, the other is a
// problem naming both, and updates of either source (the URL failing and
// answering again included) never make them take turns.
func TestFileAndURLPodOfOneNameDoNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{Sources: []string{manifest.SourceFile, manifest.SourceHTTP}})
		const url = "http://10.0.0.1/pods"
		fromURL := func(uid string) manifest.Pod {
			p := testPod("web", uid, v1.RestartPolicyAlways, ctr("a", "busybox"))
			p.Source, p.Origin = manifest.SourceHTTP, url
			return p
		}
		file := testPod("web", "file-uid", v1.RestartPolicyAlways, ctr("a", "busybox"))
		sendURL := func(u source.Update) {
			u.Source = manifest.SourceHTTP
			h.updates <- u
			synctest.Wait()
		}

		sendURL(source.Update{Pods: []manifest.Pod{fromURL("url-uid")}})
		h.send([]manifest.Pod{file})
		if p := h.pod("web"); p.UID != "url-uid" {
			t.Fatalf("running %s, want the URL's pod, which was first and runs", p.UID)
		}
		probs := h.a.Problems()
		if len(probs) != 1 || probs[0].Origin != file.Origin ||
			!strings.Contains(probs[0].Err.Error(), url) || !strings.Contains(probs[0].Err.Error(), file.Origin) {
			t.Fatalf("problems = %v, want the file's copy named with both origins", probs)
		}

		calls := len(rt.Calls())
		failing := manifest.Problem{Origin: url, Err: errors.New(url + ": HTTP 503 Service Unavailable")}
		for range 3 {
			sendURL(source.Update{Pods: []manifest.Pod{fromURL("url-uid")}, Problems: []manifest.Problem{failing}})
			h.send([]manifest.Pod{file})
			sendURL(source.Update{Pods: []manifest.Pod{fromURL("url-uid")}})
			h.send([]manifest.Pod{file})
		}
		if got := rt.Calls()[calls:]; len(got) != 0 {
			t.Errorf("updates of unchanged pods made runtime calls %q", got)
		}
		if p := h.pod("web"); p.UID != "url-uid" {
			t.Errorf("running %s after the updates, want url-uid still", p.UID)
		}

		// The URL's copy goes: the file's runs, once.
		sendURL(source.Update{Pods: []manifest.Pod{}})
		if p := h.pod("web"); p.UID != "file-uid" {
			t.Errorf("running %s, want the file's pod", p.UID)
		}
		starts := 0
		for _, c := range rt.Calls()[calls:] {
			if strings.HasPrefix(c, "start file-uid/") {
				starts++
			}
		}
		if starts != 1 || slices.Contains(rt.Calls()[calls:], "start url-uid/a#1") {
			t.Errorf("calls %q, want the file's pod started once", rt.Calls()[calls:])
		}
		if probs := h.a.Problems(); len(probs) != 0 {
			t.Errorf("problems = %v after the URL dropped its copy", probs)
		}
	})
}
