package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
)

// defaultOnceTimeout is how long the kubelet's --runonce waited for a pod's
// containers to run: 10 retries 1s apart, the delay doubling each time
// (runonce.go: runOnceMaxRetries, runOnceRetryDelay, runOnceRetryDelayBackoff),
// 1s+2s+...+512s.
const defaultOnceTimeout = 1023 * time.Second

// runOnce is `run --once`, the kubelet's --runonce for a machine's first
// boot (a Type=oneshot unit): read the manifests once, start every pod, wait
// until each runs or has finished or cannot start, print a line per pod and
// exit, 0 only if all of them run or succeeded. The pods keep running: the
// daemon started later adopts them. Only the CLI socket is served, so that
// ps and events work meanwhile; neither the read-only port nor the import
// folder's watch runs.
func runOnce(cfg *config.Config, hooks testHooks, logger *slog.Logger, timeout time.Duration, out io.Writer) error {
	root := context.Background()
	d, err := newDaemon(root, cfg, hooks, logger, true)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(root, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return d.once(ctx, timeout, out)
}

func (d *daemon) once(ctx context.Context, timeout time.Duration, out io.Writer) error {
	defer d.lock.Close()
	// The runtime's own goroutines end; its pods and monitors keep running.
	defer d.runtime.Close()
	// On a first boot the images come in the import folder: in the store
	// before any pod starts, so that a missing image is final.
	importDir := filepath.Join(d.cfg.RootDir, "images", "import")
	if err := d.images.ImportDir(ctx, importDir); err != nil {
		d.logger.Error("image import folder not read", "dir", importDir, "err", err)
	}
	sock, err := server.ListenUnix(filepath.Join(d.cfg.RunDir, socketName))
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, runCtx := errgroup.WithContext(runCtx)
	httpLog := d.logger.With("subsystem", "http")
	lim := server.DefaultLimits(server.CLIMaxConns).FitFiles(openFileLimit())
	g.Go(func() error {
		return server.Serve(runCtx, sock, server.CLI(d.agent, httpLog), lim, httpLog.With("listener", "cli"))
	})
	updates := make(chan source.Update)
	g.Go(func() error { return d.sources.Run(runCtx, updates) })
	g.Go(func() error { return d.agent.Run(runCtx, updates) })

	d.logger.Info("run once: waiting for every pod to run", "timeout", timeout)
	waitCtx, stopWait := context.WithTimeout(runCtx, timeout)
	results, settled := d.agent.WaitOnce(waitCtx)
	stopWait()
	interrupted := ctx.Err() != nil
	cancel()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := printOnce(out, results); err != nil {
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

// printOnce writes one line per pod and per manifest problem, what run
// --once found, then why each that did not run did not.
func printOnce(out io.Writer, results []agent.OnceResult) error {
	if len(results) == 0 {
		_, err := fmt.Fprintln(out, "No pods.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tRESULT\tSTATUS\tRESTARTS")
	var why []string
	for _, r := range results {
		if r.Pod == nil {
			fmt.Fprintf(tw, "-\t%s\t%s\t-\t-\n", r.Problem.Origin, r.Outcome)
			why = append(why, r.Problem.Origin+": "+r.Message)
			continue
		}
		restarts := 0
		for _, cs := range r.Pod.Status.ContainerStatuses {
			restarts += int(cs.RestartCount)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.Pod.Namespace, r.Pod.Name, r.Outcome, podStatus(*r.Pod), restarts)
		if !r.OK() && r.Message != "" {
			why = append(why, r.Pod.Namespace+"/"+r.Pod.Name+" "+r.Message)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if len(why) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Not running:")
		for _, w := range why {
			fmt.Fprintf(out, "  %s\n", oneLine(w, 2000))
		}
	}
	return nil
}
