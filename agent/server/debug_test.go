package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// POST /debug streams the debug container's process as exec streams one,
// and answers a request refused before it runs with its status code.
func TestDebugHandler(t *testing.T) {
	a := testAgent
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		fmt.Fprintf(spec.Stdout, "%s %q tty %v", id, spec.Cmd, spec.TTY)
		return 7, nil
	}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	c, err := dialExec(t, srv, "/debug/default/web-node1?"+url.Values{"command": {"ps"}, "image": {"busybox"}, "tty": {"true"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if st, out, _ := c.result(t); st.ExitCode != 7 || out != `debug ["ps"] tty true` {
		t.Errorf("debug: status %+v, stdout %q; want exit 7 and the process's output", st, out)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{"/debug/default/nope-node1?command=ps&image=busybox", "does not exist"},
		{"/debug/default/web-node1?command=ps", "invalid debug request: no image"},
		{"/debug/default/web-node1?image=busybox", "exec: no command"},
	} {
		if _, err := dialExec(t, srv, tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("debug %s = %v, want %q", tc.path, err, tc.want)
		}
	}
}

func TestErrorCode(t *testing.T) {
	for err, want := range map[error]int{
		podspec.ErrNotExist:     http.StatusNotFound,
		podspec.ErrNotRunning:   http.StatusConflict,
		podspec.ErrDebugInvalid: http.StatusBadRequest,
		podspec.ErrDebugLimit:   http.StatusTooManyRequests,
		errors.New("other"):     http.StatusInternalServerError,
	} {
		if got := errorCode(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("errorCode(%v) = %d, want %d", err, got, want)
		}
	}
}
