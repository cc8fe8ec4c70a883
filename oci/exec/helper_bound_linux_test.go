//go:build linux && cgo

package exec

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// An exec whose request is over the exec server's bound (a manifest's
// environment of control characters, each escaped to six bytes in JSON)
// fails with an error that says so, and no server is started for it: the
// server would refuse the request by closing the exec's socket, which says
// nothing of why, and every exec probe of the pod would start servers.
func TestExecRequestOverTheBoundFailsBeforeAnyServer(t *testing.T) {
	// No program here: a start of a server would fail with another error.
	s := NewServer(Helper{Path: filepath.Join(t.TempDir(), "no-server")}, t.TempDir(), time.Minute)
	defer s.Close()
	env := "A=" + strings.Repeat("\x01", mon.MaxExecRequest/6+1)
	hp := &helperProcess{server: s, id: "c", spec: specs.Process{Env: []string{env}}, es: podspec.ExecSpec{Cmd: []string{"true"}}}
	_, err := hp.start(context.Background(), childIO{})
	if err == nil || !strings.Contains(err.Error(), "over the exec server's bound") {
		t.Fatalf("exec of a request over the bound: %v, want an error naming the bound", err)
	}
	if s.cur != nil {
		t.Fatal("a server was started for a request over the bound")
	}
}
