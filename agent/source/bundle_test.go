package source

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// bundleFixture is a bundles directory whose current bundle a test sets.
type bundleFixture struct {
	dir string
	mu  sync.Mutex
	set BundleSet
	err error
}

func (f *bundleFixture) current() (BundleSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set, f.err
}

// apply writes a bundle of files and makes it current; the source hears of
// it as of the daemon's state: a change in the directory.
func (f *bundleFixture) apply(t *testing.T, id, name string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(f.dir, id, "manifests")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.set = BundleSet{ID: id, Name: name, Dir: dir}
	f.mu.Unlock()
	if err := os.WriteFile(filepath.Join(f.dir, "state.json"), []byte(id), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startBundle(t *testing.T) (*bundleFixture, <-chan Update, <-chan BundleSent) {
	t.Helper()
	f := &bundleFixture{dir: t.TempDir()}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	sent := make(chan BundleSent, 16)
	src := NewBundle(BundleConfig{
		Dir: f.dir, Current: f.current, NodeName: "node1", Period: time.Hour,
		Seen: func(types.UID) time.Time { return seenAt }, Logger: logger,
		Sent: func(s BundleSent) { sent <- s },
	})
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f, out, sent
}

const bundleConfigMap = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  a: b\n"

func TestBundleSourceDeliversTheBundleWhole(t *testing.T) {
	f, out, sent := startBundle(t)
	if u := next(t, out); u.Source != manifest.SourceBundle || len(u.Pods) != 0 {
		t.Fatalf("first update %+v, want the bundle source's empty set", u)
	}
	<-sent
	f.apply(t, "aaaa", "appliance", map[string]string{
		"etcd.yaml": podYAML("etcd", "etcd:1") + bundleConfigMap,
		"web.yaml":  podYAML("web", "web:1"),
	})
	u := next(t, out)
	if len(u.Pods) != 2 || len(u.Objects) != 1 || len(u.Problems) != 0 {
		t.Fatalf("update %d pods, %d objects, problems %v; want 2, 1, none", len(u.Pods), len(u.Objects), u.Problems)
	}
	first := map[string]types.UID{}
	for _, p := range u.Pods {
		first[p.Name] = p.UID
		if p.Source != manifest.SourceBundle || !strings.HasPrefix(p.Origin, "bundle appliance/") ||
			p.Annotations[manifest.AnnotationSource] != manifest.SourceBundle {
			t.Errorf("pod %s: source %q origin %q annotation %q", p.Name, p.Source, p.Origin, p.Annotations[manifest.AnnotationSource])
		}
	}
	if first["etcd-node1"] == "" || first["web-node1"] == "" {
		t.Fatalf("pods %v, want etcd-node1 and web-node1", first)
	}
	if s := <-sent; s.Set.ID != "aaaa" || len(s.Pods) != 2 || s.Err != nil {
		t.Fatalf("sent %+v", s)
	}

	// The next bundle changes one pod: the other keeps its UID (it is not
	// restarted), the changed one has a new one.
	f.apply(t, "bbbb", "appliance", map[string]string{
		"etcd.yaml": podYAML("etcd", "etcd:1") + bundleConfigMap,
		"web.yaml":  podYAML("web", "web:2"),
	})
	u = next(t, out)
	for _, p := range u.Pods {
		switch same := p.UID == first[p.Name]; {
		case p.Name == "etcd-node1" && !same:
			t.Errorf("etcd's UID changed with a bundle that does not change it")
		case p.Name == "web-node1" && same:
			t.Errorf("web's UID is the same for another image")
		}
	}
	<-sent

	// A bundle with one unusable manifest gives none of its pods: the one
	// before stays, with a problem naming the file.
	f.apply(t, "cccc", "appliance", map[string]string{
		"etcd.yaml": podYAML("etcd", "etcd:3"),
		"bad.yaml":  broken,
	})
	u = next(t, out)
	if len(u.Pods) != 2 || len(u.Problems) != 1 || !strings.Contains(u.Problems[0].Err.Error(), "bundle appliance/bad.yaml") {
		t.Fatalf("unusable bundle: %d pods, problems %v; want the 2 before and one problem naming bad.yaml", len(u.Pods), u.Problems)
	}
	for _, p := range u.Pods {
		if p.Name == "web-node1" && p.Spec.Containers[0].Image != "web:2" {
			t.Errorf("web runs %s, want the last usable bundle's web:2", p.Spec.Containers[0].Image)
		}
	}
	if s := <-sent; s.Set.ID != "cccc" || s.Err == nil || len(s.Pods) != 0 {
		t.Fatalf("sent %+v, want bundle cccc refused", s)
	}

	// The state unreadable: what runs stays.
	f.mu.Lock()
	f.err = errors.New("state.json: unexpected end of JSON input")
	f.mu.Unlock()
	if err := os.WriteFile(filepath.Join(f.dir, "state.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u = next(t, out); len(u.Pods) != 2 {
		t.Fatalf("state unreadable: %d pods, want the 2 running", len(u.Pods))
	}

	// No bundle: no pods.
	f.mu.Lock()
	f.err, f.set = nil, BundleSet{}
	f.mu.Unlock()
	if err := os.WriteFile(filepath.Join(f.dir, "state.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u = next(t, out); len(u.Pods) != 0 || len(u.Problems) != 0 {
		t.Fatalf("no bundle: %d pods, problems %v", len(u.Pods), u.Problems)
	}
}

// A bundle's directory holds files the daemon wrote: a symlink there
// (to a file the bundle did not carry) is refused, not followed, and so
// is a bundle of more files than MaxBundleFiles.
func TestBundleSourceRefusesWhatABundleDoesNotHold(t *testing.T) {
	f, out, _ := startBundle(t)
	next(t, out)
	secret := filepath.Join(t.TempDir(), "elsewhere.yaml")
	if err := os.WriteFile(secret, []byte(podYAML("elsewhere", "x:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.dir, "dddd", "manifests")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	f.apply(t, "dddd", "b", map[string]string{"a.yaml": podYAML("a", "a:1")})
	u := next(t, out)
	if len(u.Pods) != 0 || len(u.Problems) != 1 || !strings.Contains(u.Problems[0].Err.Error(), "link.yaml: not a regular file") {
		t.Fatalf("symlink: %d pods, problems %v", len(u.Pods), u.Problems)
	}

	many := map[string]string{}
	for i := range MaxBundleFiles + 1 {
		many[string(rune('a'+i%26))+strings.Repeat("x", i/26)+".yaml"] = podYAML("p", "p:1")
	}
	f.apply(t, "eeee", "b", many)
	u = next(t, out)
	if len(u.Pods) != 0 || len(u.Problems) != 1 || !strings.Contains(u.Problems[0].Err.Error(), "more than 256 manifests") {
		t.Fatalf("too many files: %d pods, problems %v", len(u.Pods), u.Problems)
	}
}
