package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// The self-signed key and certificate are written through atomicfile, key
// first, each fsynced with its directory, itself made with its parent
// fsynced: after a power cut the certificate, whose presence means both are
// whole, is never there without its key, nor gone with its directory.
func TestSelfSignedWrittenDurably(t *testing.T) {
	pki := filepath.Join(t.TempDir(), "pki")
	var mu sync.Mutex
	var done, made []string
	defer atomicfile.SetTestHook(func(s atomicfile.Step, path string) {
		if s == atomicfile.ParentSynced && strings.HasPrefix(path, pki) {
			mu.Lock()
			made = append(made, path)
			mu.Unlock()
		}
		if s == atomicfile.DirSynced && strings.HasPrefix(path, pki) {
			mu.Lock()
			done = append(done, filepath.Base(path))
			mu.Unlock()
		}
	})()
	if _, err := (TLS{PKIDir: pki, Host: "node1"}).Config(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(done) != "[kubelet.key kubelet.crt]" {
		t.Errorf("written durably: %v, want the key then the certificate", done)
	}
	if fmt.Sprint(made) != "["+pki+"]" {
		t.Errorf("directories made with their parent fsynced: %v, want %s", made, pki)
	}
	for name, mode := range map[string]os.FileMode{"kubelet.key": 0o600, "kubelet.crt": 0o644} {
		if fi, err := os.Stat(filepath.Join(pki, name)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %v", name, fi, err, mode)
		}
	}
}
