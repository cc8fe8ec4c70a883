package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/oci"
)

// The command line reaches the daemon on its socket; with nothing there, the
// records of a run dir a daemon used, saying so and whether a process still
// holds the run dir; and in a run dir no daemon used, nothing (the caller
// says it is not running, and names --run-dir).
func TestConnector(t *testing.T) {
	get := func(c *Connector) (*v1.PodList, error) {
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.Dial(ctx) }}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("http://staticpodd/pods")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var list v1.PodList
		return &list, json.NewDecoder(resp.Body).Decode(&list)
	}
	root := t.TempDir()

	t.Run("never used", func(t *testing.T) {
		var w bytes.Buffer
		if _, err := get(NewConnector(root, t.TempDir(), &w)); !errors.Is(err, fs.ErrNotExist) || w.Len() > 0 {
			t.Errorf("a run dir no daemon used: %v, said %q", err, w.String())
		}
	})
	t.Run("records", func(t *testing.T) {
		run := t.TempDir()
		if err := os.WriteFile(filepath.Join(run, oci.LockFile), []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		list, err := get(NewConnector(root, run, &w))
		if err != nil || list.Items == nil || len(list.Items) != 0 || !strings.HasPrefix(w.String(), "staticpodd: daemon not running, from records under "+run) {
			t.Errorf("records of an empty run dir: %+v, %v; said %q", list, err, w.String())
		}
	})
	t.Run("held", func(t *testing.T) {
		run := t.TempDir()
		lock, err := oci.LockRunDir(run)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		var w bytes.Buffer
		if _, err := get(NewConnector(root, run, &w)); err != nil ||
			!strings.Contains(w.String(), "daemon (pid "+strconv.Itoa(os.Getpid())+") holds the run dir but does not answer") {
			t.Errorf("a run dir held: %v; said %q", err, w.String())
		}
	})
	t.Run("daemon", func(t *testing.T) {
		run := t.TempDir()
		if err := os.WriteFile(filepath.Join(run, oci.LockFile), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", filepath.Join(run, SocketName))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"kind":"PodList","items":[{"metadata":{"name":"live"}}]}`))
		})}
		go srv.Serve(l)
		defer srv.Close()
		var w bytes.Buffer
		if list, err := get(NewConnector(root, run, &w)); err != nil || len(list.Items) != 1 || w.Len() > 0 {
			t.Errorf("a running daemon: %+v, %v; said %q", list, err, w.String())
		}
	})
}
