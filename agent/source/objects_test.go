package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
)

const configMapYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: VALUE}\n"

func credSecretYAML(annotation string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: keys\n  annotations: {staticpodd.io/credentials: \"" + annotation + "\"}\nstringData: {plain: p}\n"
}

// startWith runs a file source on path, set up by setup before it runs.
func startWith(t *testing.T, path string, setup func(*File)) (<-chan Update, *File) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update)
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	src := NewFile(path, "node1", time.Hour, nil, logger)
	setup(src)
	go func() { done <- src.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out, src
}

// object is the object of kind named name in u, or nil.
func object(u Update, kind, name string) *objects.Object {
	for _, o := range u.Objects {
		if o.Kind() == kind && o.Name() == name {
			return o
		}
	}
	return nil
}

func configValue(value string) func(Update) bool {
	return func(u Update) bool {
		o := object(u, "ConfigMap", "cfg")
		return o != nil && o.ConfigMap.Data["a"] == value
	}
}

func problemWith(s string) func(Update) bool {
	return func(u Update) bool {
		for _, p := range u.Problems {
			if strings.Contains(p.Err.Error(), s) {
				return true
			}
		}
		return false
	}
}

// The objects of every file come with the pods; an edit of an object alone
// is an update, a file of objects only runs no pod, and a file that turns
// bad keeps its last good pod and objects, with a problem naming the field.
func TestFileObjects(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "busybox")+"---\n"+configMapYAML)
	writeFile(t, filepath.Join(dir, "objects.yaml"), strings.ReplaceAll(configMapYAML, "cfg", "other"))
	ch, _ := startWith(t, dir, func(*File) {})
	u := waitFor(t, ch, "pod and objects", func(u Update) bool { return len(u.Objects) == 2 })
	if !hasPods("web-node1")(u) {
		t.Errorf("%s, want web-node1 alone", describe(u))
	}
	if o := object(u, "ConfigMap", "cfg"); o == nil || o.Origin != filepath.Join(dir, "web.yaml") || o.Namespace() != "default" {
		t.Errorf("ConfigMap cfg = %+v", o)
	}

	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "busybox")+"---\n"+strings.Replace(configMapYAML, "VALUE", "EDITED", 1))
	waitFor(t, ch, "the edited ConfigMap", configValue("EDITED"))

	// Turned bad: kept, and a problem names the document and the field.
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "busybox")+"---\n"+strings.Replace(configMapYAML, "{a: VALUE}", "{a/b: VALUE}", 1))
	u = waitFor(t, ch, "a problem", problemWith("document 2: data[a/b]: Invalid value"))
	if !hasPods("web-node1")(u) || !configValue("EDITED")(u) || object(u, "ConfigMap", "other") == nil {
		t.Errorf("a bad file took its pod or objects, or another file's: pods %s, objects %d", describe(u), len(u.Objects))
	}

	// Removed: its objects go with it.
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	u = waitFor(t, ch, "no pod", hasPods())
	if len(u.Objects) != 1 || object(u, "ConfigMap", "other") == nil {
		t.Errorf("objects after the removal: %d", len(u.Objects))
	}
}

// A Secret's keys named by the credentials annotation get the credentials'
// values, read at every list; one that cannot be read leaves the Secret out
// with a problem naming the file, the Secret, the key and the credential.
func TestFileCredentials(t *testing.T) {
	dir, creds := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "keys.yaml")
	writeFile(t, path, credSecretYAML("tls.key=apiserver-key"))
	writeFile(t, filepath.Join(creds, "apiserver-key"), "KEY1")
	ch, src := startWith(t, dir, func(f *File) { f.Credentials = creds })
	secretKey := func(want string) func(Update) bool {
		return func(u Update) bool {
			o := object(u, "Secret", "keys")
			return o != nil && string(o.Secret.Data["tls.key"]) == want && string(o.Secret.Data["plain"]) == "p"
		}
	}
	waitFor(t, ch, "the credential's value", secretKey("KEY1"))

	// A credential changed (no inotify on it): the next list has it.
	writeFile(t, filepath.Join(creds, "apiserver-key"), "KEY2")
	src.Relist()
	waitFor(t, ch, "the new value", secretKey("KEY2"))

	os.Remove(filepath.Join(creds, "apiserver-key"))
	src.Relist()
	u := waitFor(t, ch, "the Secret left out", func(u Update) bool { return object(u, "Secret", "keys") == nil })
	want := path + `: Secret default/keys: key "tls.key": credential "apiserver-key": ` + filepath.Join(creds, "apiserver-key") + ": no such file or directory; the Secret is not given to pods until it can be read"
	if len(u.Problems) != 1 || u.Problems[0].Err.Error() != want || u.Problems[0].Origin != path {
		t.Errorf("problems %v\nwant %s", u.Problems, want)
	}
}

// Without a credentials directory a Secret taking credentials is left out,
// and the problem says why.
func TestFileCredentialsWithoutDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "keys.yaml"), credSecretYAML("k=c"))
	ch, _ := startWith(t, dir, func(*File) {})
	u := waitFor(t, ch, "a problem", problemWith("no credentials directory: $CREDENTIALS_DIRECTORY is not set"))
	if len(u.Objects) != 0 {
		t.Errorf("objects %d, want the Secret left out", len(u.Objects))
	}
}

// A credential is a regular file directly in the directory: nothing else is
// read, and nothing blocks.
func TestReadCredentialHostile(t *testing.T) {
	creds, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "OUTSIDE")
	writeFile(t, filepath.Join(creds, "ok"), "fine")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(creds, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(creds, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(creds, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(creds, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(creds, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(64 << 20); err != nil { // sparse: costs nothing
		t.Fatal(err)
	}
	big.Close()

	if data, err := ReadCredential(creds, "ok", 4); err != nil || string(data) != "fine" {
		t.Errorf("ReadCredential(ok) = %q, %v", data, err)
	}
	for _, tc := range []struct{ name, want string }{
		{"link", "a symlink, and none is followed"},
		{"dirlink", "a symlink, and none is followed"},
		{"fifo", "not a regular file"},
		{"dir", "not a regular file"},
		{"big", "larger than the 1048576 bytes the Secret has left of 1048576"},
		{"ok-not-there", "no such file or directory"},
		{"../" + filepath.Base(outside) + "/secret", "is not a credential name"},
		{"a/b", "is not a credential name"},
		{"..", "is not a credential name"},
		{".", "is not a credential name"},
		{"", "is not a credential name"},
	} {
		done := make(chan struct{})
		var data []byte
		var err error
		go func() {
			defer close(done)
			data, err = ReadCredential(creds, tc.name, objects.MaxSize)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadCredential(%q) blocked", tc.name)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || data != nil {
			t.Errorf("ReadCredential(%q) = %q, %v; want an error with %q", tc.name, data, err, tc.want)
		}
	}
	// The limit is what the Secret has left.
	if _, err := ReadCredential(creds, "ok", 3); err == nil {
		t.Error("a credential over the limit was read")
	}
	if _, err := ReadCredential(filepath.Join(creds, "nope"), "ok", 4); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadCredential in a missing directory: %v", err)
	}
}

// memStore is a Store in memory.
type memStore struct{ kept []Manifest }

func (s *memStore) Offer(string, []Manifest) {}
func (s *memStore) Stored(string) []Manifest { return s.kept }

// A file unusable at start runs the last good pod the Store kept, and the
// objects written beside it then come back with it; the Store keeps the
// file as written: a credential's value is not in it.
func TestRestoreBringsObjectsBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	good := podYAML("web", "busybox") + "---\n" + configMapYAML
	p := manifest.Check([]byte(good), manifest.SourceFile, path, "node1")
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "apiVersion: v1\nkind: Pod\n") // broken at start
	store := &memStore{kept: []Manifest{{UID: p.Pods[0].UID, Source: manifest.SourceFile, Origin: path, Data: []byte(good), Seen: seenAt}}}
	ch, _ := startWith(t, dir, func(f *File) { f.Store = store })
	u := waitFor(t, ch, "the restored pod", hasPods("web-node1"))
	if !configValue("VALUE")(u) {
		t.Errorf("objects %d, want the ConfigMap restored with the pod", len(u.Objects))
	}
}

// urlObjects is a List of a pod, a ConfigMap and a Secret taking a
// credential.
const urlObjects = `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"VALUE"}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"keys","annotations":{"staticpodd.io/credentials":"k=cred"}}}]}`

// A URL's List gives objects beside its pods, credentials read at every
// poll; the saved body is the List as served (no credential's value), and
// brings the objects back after a restart while the server is down.
func TestURLListObjects(t *testing.T) {
	creds := t.TempDir()
	writeFile(t, filepath.Join(creds, "cred"), "CANARY-1")
	save := filepath.Join(t.TempDir(), "url", "last-good")
	s, srv := newServed(t, 200, urlObjects)
	first := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save, Credentials: creds})
	secretValue := func(want string) func(Update) bool {
		return func(u Update) bool {
			o := object(u, "Secret", "keys")
			return withPods("a-node1")(u) && configValue("VALUE")(u) && o != nil && string(o.Secret.Data["k"]) == want
		}
	}
	first.waitFor(t, "the list", secretValue("CANARY-1"))
	writeFile(t, filepath.Join(creds, "cred"), "CANARY-2")
	first.waitFor(t, "the credential's new value, the body unchanged", secretValue("CANARY-2"))
	first.stop()
	saved, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(saved), "CANARY") {
		t.Errorf("the saved body holds a credential's value:\n%s", saved)
	}

	s.set(503, "")
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save, Credentials: creds})
	if u := r.next(t); !hasProblem("HTTP 503", "a-node1")(u) || !configValue("VALUE")(u) || object(u, "Secret", "keys") == nil {
		t.Errorf("after a restart with the server down: pods %v, objects %d", podNames(u), len(u.Objects))
	}
}

// grepDir fails t for each file under dir that holds canary.
func grepDir(t *testing.T, dir, canary string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), canary) {
			t.Errorf("%s holds the Secret's value:\n%s", path, b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A URL List with a Secret's values inline is saved without that Secret:
// after a restart with the server down the pod and the ConfigMap come back,
// the Secret does not (its pods' containers wait for it); the body served
// again brings it back, the pod unchanged.
func TestURLSaveKeepsNoSecretValue(t *testing.T) {
	const canary = "CANARY-url-inline"
	body := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"VALUE"}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"keys"},"stringData":{"k":"` + canary + `"}}]}`
	s, dir, uid, r, u := savedThenDown(t, body, canary, func(u Update) bool {
		o := object(u, "Secret", "keys")
		return withPods("a-node1")(u) && o != nil && string(o.Secret.Data["k"]) == canary
	})
	if !hasProblem("HTTP 503", "a-node1")(u) || u.Pods[0].UID != uid || !configValue("VALUE")(u) || object(u, "Secret", "keys") != nil {
		t.Fatalf("after a restart with the server down: pods %v, objects %d, want the pod and the ConfigMap alone", podNames(u), len(u.Objects))
	}
	s.set(200, body)
	u = r.waitFor(t, "the Secret served again", func(u Update) bool { return object(u, "Secret", "keys") != nil })
	if !withPods("a-node1")(u) || u.Pods[0].UID != uid {
		t.Errorf("the Secret back changed the pods: %v", podNames(u))
	}
	r.stop()
	grepDir(t, dir, canary)
}

// A URL body is read as one document: a Secret written in a second
// document is not used, and is not saved either.
func TestURLSaveKeepsNoSecretAfterFirstDocument(t *testing.T) {
	const canary = "CANARY-url-second-document"
	body := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: busybox}]\n" +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: keys}\nstringData: {k: " + canary + "}\n"
	_, _, uid, _, u := savedThenDown(t, body, canary, withPods("a-node1"))
	if !hasProblem("HTTP 503", "a-node1")(u) || u.Pods[0].UID != uid {
		t.Errorf("after a restart with the server down: pods %v, want a-node1 with UID %s", podNames(u), uid)
	}
}

// savedThenDown serves body to a URL source with a save file until ready,
// stops it, checks that nothing under the save file's directory holds
// canary, and starts the source again with the server answering 503: it
// returns the server, the directory, the pod's UID, the source started again
// and its first update.
func savedThenDown(t *testing.T, body, canary string, ready func(Update) bool) (*served, string, types.UID, *urlRun, Update) {
	t.Helper()
	dir := t.TempDir()
	save := filepath.Join(dir, "url", "last-good")
	s, srv := newServed(t, 200, body)
	first := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save})
	uid := first.waitFor(t, "the first list", ready).Pods[0].UID
	first.stop()
	if _, err := os.Stat(save); err != nil {
		t.Fatal(err)
	}
	grepDir(t, dir, canary)
	s.set(503, "")
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save})
	return s, dir, uid, r, r.next(t)
}

// recordingStore is a Store in memory that keeps what it is offered.
type recordingStore struct {
	mu      sync.Mutex
	offered []Manifest
}

func (s *recordingStore) Offer(_ string, set []Manifest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = append(s.offered, set...)
}
func (s *recordingStore) Stored(string) []Manifest { return nil }

// The file source offers the Store its pods' manifests without the values
// of Secrets written inline beside them, and a copy kept by an older daemon
// with them is not offered on.
func TestFileStoreKeepsNoSecretValue(t *testing.T) {
	const canary = "CANARY-file-inline"
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	good := podYAML("web", "busybox") + "---\n" + configMapYAML +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: keys}\nstringData: {k: " + canary + "}\n"
	writeFile(t, path, good)
	store := &recordingStore{}
	ch, _ := startWith(t, dir, func(f *File) { f.Store = store })
	u := waitFor(t, ch, "the pod", func(u Update) bool { return hasPods("web-node1")(u) && object(u, "Secret", "keys") != nil })
	uid := u.Pods[0].UID
	store.mu.Lock()
	offered := store.offered
	store.mu.Unlock()
	if len(offered) == 0 {
		t.Fatal("nothing offered")
	}
	for _, m := range offered {
		if strings.Contains(string(m.Data), canary) {
			t.Errorf("offered the Secret's value:\n%s", m.Data)
		}
	}

	// An older daemon's copy, with the value: the pod and ConfigMap come
	// back, the Secret does not, and the copy offered on has no value.
	writeFile(t, path, "apiVersion: v1\nkind: Pod\n")
	old := &memStore{kept: []Manifest{{UID: uid, Source: manifest.SourceFile, Origin: path, Data: []byte(good), Seen: seenAt}}}
	rec := &recordingStore{}
	ch2, _ := startWith(t, dir, func(f *File) { f.Store = storeOf{old, rec} })
	u = waitFor(t, ch2, "the restored pod", hasPods("web-node1"))
	if u.Pods[0].UID != uid || !configValue("VALUE")(u) || object(u, "Secret", "keys") != nil {
		t.Errorf("restored: pods %s, objects %d, want the pod and the ConfigMap alone", describe(u), len(u.Objects))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range rec.offered {
		if strings.Contains(string(m.Data), canary) {
			t.Errorf("offered on the Secret's value of an old copy:\n%s", m.Data)
		}
	}
}

// storeOf reads from one Store and offers to another.
type storeOf struct {
	from *memStore
	to   *recordingStore
}

func (s storeOf) Offer(src string, set []Manifest) { s.to.Offer(src, set) }
func (s storeOf) Stored(src string) []Manifest     { return s.from.Stored(src) }

// A save file an older daemon wrote, with a Secret's values, is used
// without them and saved again without them.
func TestURLOldSaveFileCleaned(t *testing.T) {
	const canary = "CANARY-old-save"
	body := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"keys"},"stringData":{"k":"` + canary + `"}}]}`
	_, srv := newServed(t, 503, "")
	save := filepath.Join(t.TempDir(), "last-good")
	writeFile(t, save, saveHeader(srv.URL)+body)
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save})
	if u := r.next(t); !hasProblem("HTTP 503", "a-node1")(u) || len(u.Objects) != 0 {
		t.Fatalf("from the old save file: pods %v, objects %d, want the pod alone", podNames(u), len(u.Objects))
	}
	r.stop()
	grepDir(t, filepath.Dir(save), canary)
	if b, err := os.ReadFile(save); err != nil || !strings.Contains(string(b), `"name":"a"`) {
		t.Errorf("saved again: %q, %v; want the pod kept", b, err)
	}
}

// A manifest of a few KiB whose Secrets all name one large credential (up
// to 1 MiB, systemd's CREDENTIAL_SIZE_MAX) costs that credential once a
// list, not once a Secret: 1000 of them would hold a GiB of copies.
func TestCredentialReadOncePerList(t *testing.T) {
	creds := t.TempDir()
	big := strings.Repeat("k", 512<<10)
	writeFile(t, filepath.Join(creds, "bundle"), big)
	var objs []*objects.Object
	for i := range 200 {
		s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i),
			Annotations: map[string]string{objects.AnnotationCredentials: "ca.crt=bundle"}}}
		o, errs := objects.NewSecret(s, manifest.SourceFile, "/m.yaml", nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		objs = append(objs, o)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	filled, problems := fillCredentials(creds, objs)
	runtime.ReadMemStats(&after)
	if len(problems) > 0 || len(filled) != len(objs) {
		t.Fatalf("filled %d of %d, problems %v", len(filled), len(objs), problems)
	}
	for _, o := range filled {
		if string(o.Secret.Data["ca.crt"]) != big {
			t.Fatalf("%s: not the credential's value", o.Name())
		}
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("filling 200 Secrets from one 512 KiB credential allocated %d MiB, want it read once", got>>20)
	}
}
