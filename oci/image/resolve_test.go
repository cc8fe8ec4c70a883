package image

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// Resolve answers the digest a tag names now, the repo digest a pull of the
// tag records, by a HEAD request: no blob, no manifest body.
func TestResolveFollowsTheTag(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/app:v1", img)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger())
	var gets int
	wrap := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method != http.MethodHead && r.URL.Path != "/v2/" {
			gets++
		}
		next.ServeHTTP(w, r)
	}
	reg.wrap.Store(&wrap)
	ref := reg.host + "/team/app:v1"
	got, err := p.Resolve(t.Context(), ref)
	md, _ := img.Digest()
	if err != nil || got != reg.host+"/team/app@"+md.String() {
		t.Fatalf("Resolve = %q, %v; want %s@%s", got, err, reg.host+"/team/app", md)
	}
	if gets != 0 {
		t.Errorf("%d requests other than the ping and HEAD", gets)
	}
	reg.wrap.Store(nil)
	pulled, err := p.Pull(t.Context(), ref, nil)
	if err != nil || pulled.RepoDigests[0] != got {
		t.Fatalf("pull records %v, %v; Resolve said %s", pulled.RepoDigests, err, got)
	}
	// The repo digest finds the image pulled by tag: what a generation
	// rolled back to runs, and what image GC is told to keep.
	if byDigest, err := p.store.Get(got); err != nil || byDigest.ID != pulled.ID {
		t.Fatalf("Get(%s) = %s, %v; want the image pulled by tag, %s", got, byDigest.ID, err, pulled.ID)
	}
	img2 := testImage(t, baseEntries, []entry{{name: "v2.txt", body: "two"}})
	reg.push(t, "team/app:v1", img2)
	md2, _ := img2.Digest()
	if got, err := p.Resolve(t.Context(), ref); err != nil || !strings.HasSuffix(got, "@"+md2.String()) {
		t.Fatalf("after the tag moved Resolve = %q, %v; want %s", got, err, md2)
	}
	if _, err := p.Resolve(t.Context(), reg.host+"/team/app@"+md.String()); err == nil || !strings.Contains(err.Error(), "no tag to follow") {
		t.Fatalf("Resolve of an image by digest: %v", err)
	}
}

// A registry that hangs, or answers a manifest without end, costs Resolve
// its Timeout at most, and no pull slot.
func TestResolveHostile(t *testing.T) {
	reg := newTestRegistry(t, false)
	reg.push(t, "bad/app:v1", testImage(t))
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, Timeout: 2 * time.Second, MaxParallel: 1}, discardLogger())
	release, err := p.slot(t.Context(), reg.host+"/bad/app:v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release() // every slot taken: Resolve must not need one
	cases := []struct {
		name string
		wrap func(http.ResponseWriter, *http.Request, http.Handler)
		want string
	}{
		{"hangs", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			<-r.Context().Done()
		}, "did not answer within 2s"},
		{"endless manifest", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				next.ServeHTTP(w, r)
				return
			}
			// No digest on HEAD: Resolve must read the body.
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			if r.Method == http.MethodHead {
				return
			}
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte{' '}, 64<<10)
			for range 1 << 14 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg.wrap.Store(&c.wrap)
			start := time.Now()
			_, err := p.Resolve(t.Context(), reg.host+"/bad/app:v1")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Resolve: %v; want %q", err, c.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Resolve took %s", took)
			}
		})
	}
}

// A tag that moved and is pulled again (another pod, a pull policy of
// Always, `images pull`) leaves the image it named before in the store,
// found by its repo digest, as containerd keeps it: a kept generation runs
// it by digest, and image GC, which is told what the generations ran,
// decides when it goes; only an image with no reference at all is dropped.
func TestPullOfMovedTagKeepsTheImageByDigest(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/app:v1", img)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger())
	ref := reg.host + "/team/app:v1"
	old, err := p.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	img2 := testImage(t, baseEntries, []entry{{name: "v2.txt", body: "two"}})
	reg.push(t, "team/app:v1", img2)
	moved, err := p.Pull(t.Context(), ref, nil)
	if err != nil || moved.ID == old.ID {
		t.Fatalf("pull of the moved tag: %s, %v", moved.ID, err)
	}
	if got, err := p.store.Get(old.RepoDigests[0]); err != nil || got.ID != old.ID {
		t.Fatalf("Get(%s) after the tag moved = %s, %v; want the image it named, %s", old.RepoDigests[0], got.ID, err, old.ID)
	}
	if got, err := p.store.Get(ref); err != nil || got.ID != moved.ID {
		t.Fatalf("Get(%s) = %s, %v; want the image the tag names now, %s", ref, got.ID, err, moved.ID)
	}
	// Kept while a generation ran it; once none is kept, unused, it goes.
	if _, removed, err := p.store.RemoveUnused([]string{ref, old.RepoDigests[0]}, ""); err != nil || len(removed) != 0 {
		t.Fatalf("RemoveUnused with both kept removed %v, %v", removed, err)
	}
	if _, removed, err := p.store.RemoveUnused([]string{ref}, ""); err != nil || !slices.Equal(removed, []string{old.ID}) {
		t.Fatalf("RemoveUnused removed %v, %v; want the image the tag named before, %s", removed, err, old.ID)
	}
}
