package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/oci"
)

// Records is the CLI socket's API (server.CLI) answered from what a daemon
// that is not running left under rootDir and runDir (agent.Records), for the
// command line while no daemon serves it: the pods and their containers,
// last exits and logs as recorded, and exec in a running container through
// libcontainer, without a daemon. The error names records that could not be
// read; the handler shows the rest.
func Records(ctx context.Context, rootDir, runDir string, logger *slog.Logger) (http.Handler, error) {
	containers, err := oci.Recorded(runDir)
	sandboxes, serr := oci.RecordedSandboxes(ctx, runDir)
	exec := func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		return oci.ExecRecorded(ctx, runDir, id, spec, logger)
	}
	r := agent.NewRecords(rootDir, containers, sandboxes, exec, time.Now())
	return server.CLI(r, logger), errors.Join(err, serr)
}

// Connector connects the command line to the daemon's CLI socket under
// runDir or, while nothing listens there (the daemon stopped, after `run
// --once`, or failing to start), to Records served in this process
// (server.Local), saying so once on w: the answers are the records', not a
// daemon's.
type Connector struct {
	rootDir, runDir string
	w               io.Writer

	once  sync.Once
	local *server.Local
	err   error
}

// NewConnector returns a Connector for a daemon's rootDir and runDir.
func NewConnector(rootDir, runDir string, w io.Writer) *Connector {
	return &Connector{rootDir: rootDir, runDir: runDir, w: w}
}

// Dial connects to the daemon, else to its records.
func (c *Connector) Dial(ctx context.Context) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(c.runDir, SocketName))
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) {
		return conn, err
	}
	c.once.Do(func() {
		if _, err := os.Stat(filepath.Join(c.runDir, oci.LockFile)); err != nil {
			// No daemon ever ran here: no records, and the wrong --run-dir
			// is likelier than an empty node.
			c.err = err
			return
		}
		logger := slog.New(slog.NewTextHandler(c.w, &slog.HandlerOptions{Level: slog.LevelWarn}))
		h, err := Records(ctx, c.rootDir, c.runDir, logger)
		state := "daemon not running"
		if pid, held := oci.RunDirHolder(c.runDir); held {
			state = fmt.Sprintf("daemon (pid %s) holds the run dir but does not answer on its socket (starting, stopping or stuck)", pid)
		}
		fmt.Fprintf(c.w, "staticpodd: %s, from records under %s and %s "+
			"(events: the containers' recorded creations and starts; no probe results or manifest problems)\n", state, c.runDir, c.rootDir)
		if err != nil {
			fmt.Fprintf(c.w, "staticpodd: some records could not be read: %v\n", err)
		}
		c.local = server.NewLocal(h)
	})
	if c.local == nil {
		return nil, c.err
	}
	return c.local.Dial(ctx)
}
