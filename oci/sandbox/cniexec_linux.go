//go:build linux && cgo

package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	cnitypes "github.com/containernetworking/cni/pkg/types"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// pluginExec runs CNI plugins as libcni's DefaultExec does, and bounds what
// a plugin says before it reaches a log line, an event or a status: the
// first podspec.MaxOutput bytes of its stderr are logged (libcni's RawExec
// would copy all of it onto the daemon's own stderr, past its log handler),
// and the message and details of the error it returns are cut to as much.
type pluginExec struct {
	*invoke.DefaultExec
	log *slog.Logger
}

func newPluginExec(log *slog.Logger) *pluginExec {
	return &pluginExec{DefaultExec: &invoke.DefaultExec{RawExec: &invoke.RawExec{}}, log: log}
}

func (e *pluginExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	stderr := &podspec.LimitWriter{N: podspec.MaxOutput}
	out, err := (&invoke.RawExec{Stderr: stderr}).ExecPlugin(ctx, pluginPath, stdinData, environ)
	if s := stderr.String(); s != "" {
		e.log.Info("CNI plugin wrote to stderr", "plugin", filepath.Base(pluginPath), "stderr", s)
	}
	var perr *cnitypes.Error
	if errors.As(err, &perr) {
		perr.Msg = podspec.Truncate(perr.Msg, podspec.MaxOutput)
		perr.Details = podspec.Truncate(perr.Details, podspec.MaxOutput)
	}
	return out, err
}
