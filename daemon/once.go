package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/component"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
)

// Once is `run --once`, the kubelet's --runonce for a machine's first
// boot (a Type=oneshot unit): read the manifests once, start every pod, wait
// until each runs or has finished or cannot start, print a line per pod and
// exit, 0 only if all of them run or succeeded. The pods keep running: the
// daemon started later adopts them. Only the CLI socket is served, so that
// ps and events work meanwhile; neither the read-only port nor the import
// folder's watch runs. report prints the results.
func Once(cfg *config.Config, opts Options, logger *slog.Logger, timeout time.Duration, report func([]agent.OnceResult) error) error {
	root := context.Background()
	d, err := newSystem(root, cfg, opts, logger, true)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(root, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return d.once(ctx, timeout, report)
}

func (d *System) once(ctx context.Context, timeout time.Duration, report func([]agent.OnceResult) error) error {
	// Last: the runtime's own goroutines end, its pods and monitors keep
	// running; the run directory's lock is released.
	defer d.components.Stop()
	// On a first boot the images come in the import folder: in the store
	// before any pod starts, so that a missing image is final.
	importDir := importDir(d.cfg)
	if err := d.images.ImportDir(ctx, importDir); err != nil {
		d.logger.Error("image import folder not read", "dir", importDir, "err", err)
	}
	sock, err := server.ListenUnix(filepath.Join(d.cfg.RunDir, SocketName))
	if err != nil {
		return err
	}
	// The components of the run, stopped before the runtime's and the
	// lock's: the CLI socket, the sources and the agent.
	run := component.NewManager(ctx)
	defer run.Stop()
	httpLog := d.logger.With("subsystem", "http")
	lim := server.DefaultLimits(server.CLIMaxConns).FitFiles(openFileLimit())
	updates := make(chan source.Update)
	for _, c := range []func(context.Context) error{
		func(ctx context.Context) error {
			return server.Serve(ctx, sock, server.CLI(d.agent, httpLog), lim, httpLog.With("listener", "cli"))
		},
		func(ctx context.Context) error { return d.sources.Run(ctx, updates) },
		func(ctx context.Context) error { return d.agent.Run(ctx, updates) },
	} {
		if err := run.Start(component.NewTask(c)); err != nil {
			return err
		}
	}
	runCtx := run.Context()

	d.logger.Info("run once: waiting for every pod to run", "timeout", timeout)
	waitCtx, stopWait := context.WithTimeout(runCtx, timeout)
	results, settled := d.agent.WaitOnce(waitCtx)
	stopWait()
	interrupted := ctx.Err() != nil
	if err := run.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := report(results); err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if !r.OK() {
			failed++
		}
	}
	switch {
	case interrupted:
		return fmt.Errorf("interrupted before every pod ran; the pods keep running")
	case !settled:
		return fmt.Errorf("%d of %d did not run within %s (--once-timeout); the pods keep running", failed, len(results), timeout)
	case failed > 0:
		return fmt.Errorf("%d of %d did not run; the others keep running", failed, len(results))
	}
	d.logger.Info("run once: every pod runs", "pods", len(results))
	return nil
}
