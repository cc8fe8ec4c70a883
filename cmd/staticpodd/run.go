package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/eviction"
	"github.com/staticpodd/staticpodd/agent/health"
	"github.com/staticpodd/staticpodd/agent/host"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/agent/ready"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/agent/trim"
	"github.com/staticpodd/staticpodd/oci"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/monitor"
	"github.com/staticpodd/staticpodd/sysd"
)

var _ agent.Runtime = (*oci.Runtime)(nil)

// readyExtend is how much longer each EXTEND_TIMEOUT_USEC asks systemd to
// wait for READY=1 while --ready-when's pods are on their way.
const readyExtend = time.Minute

// errSignal is the cause of the main context's cancellation on SIGTERM/SIGINT.
var errSignal = errors.New("received a stop signal")

func newRunCmd() *cobra.Command {
	var flags config.Flags
	var hooks testHooks
	var verbose, once bool
	var readyWhenFlag string
	var onceTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: keep the static pods running",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			logger := sysd.Logger(level)
			cfg, warnings, err := config.Load(flags.ConfigFile, flags)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				logger.Warn("configuration field ignored", "reason", w)
			}
			warnNotYetActedOn(cfg, logger)
			if once {
				return runOnce(cfg, hooks, logger, onceTimeout, cmd.OutOrStdout())
			}
			if cmd.Flags().Changed("once-timeout") {
				return fmt.Errorf("--once-timeout is for --once")
			}
			when, err := ready.Parse(readyWhenFlag)
			if err != nil {
				return err
			}
			return runDaemon(cfg, &flags, hooks, when, logger)
		},
	}
	flags.Register(cmd.Flags())
	hooks.register(cmd.Flags())
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log at debug level")
	cmd.Flags().BoolVar(&once, "once", false, "start every pod, wait until each runs (or has finished, for restartPolicy Never and OnFailure), print the results and exit, leaving the pods running")
	cmd.Flags().StringVar(&readyWhenFlag, "ready-when", ready.Synced, "when to tell systemd READY=1: synced (every source read, first sync done), pods-running[:NAME,...] or pods-ready[:NAME,...] (the chosen pods, or all, are Running or Ready)")
	cmd.Flags().DurationVar(&onceTimeout, "once-timeout", defaultOnceTimeout, "with --once, how long to wait for the pods")
	return cmd
}

// notYetActedOn are settings this build reads and checks but does not act on
// yet, with why: run warns once for each given a value of its own, and config
// notes them.
var notYetActedOn = map[string]string{
	"maxPods": "maxPods is not enforced yet",
}

func warnNotYetActedOn(cfg *config.Config, logger *slog.Logger) {
	for _, e := range cfg.Entries() {
		reason, ok := notYetActedOn[e.Key]
		if !ok || e.Origin == config.OriginDefault {
			continue
		}
		logger.Warn("configuration field not acted on yet", "field", e.Key, "value", e.Value, "from", e.Origin, "reason", reason)
	}
}

// daemon is every subsystem of a running staticpodd; only this file knows them all.
type daemon struct {
	cfgMu    sync.Mutex     // guards cfg, which a reload replaces
	cfg      *config.Config // what runs: a reload's new value of each live field
	logger   *slog.Logger
	notifier *readyNotifier
	status   *health.Line // STATUS=: the agent's summary and the auxiliary parts' trouble
	aux      *health.Parts
	images   *image.Store
	runtime  *oci.Runtime
	agent    *agent.Agent
	mirror   *mirror.Mirror // mirror pods and the Node; nil without a kubeconfig
	seen     *agent.SeenStore
	sources  *source.Mux   // the manifest sources: the file's, the URL's
	flags    *config.Flags // the flags of the start, for a reload; nil for run --once
	gate     *ready.Gate   // --ready-when's; nil when READY=1 follows the first sync
	lock     *os.File      // flock(2)ed <run-dir>/staticpodd.lock, held while the daemon runs
	readOnly *health.Part  // the read-only port's listener
	nodePort *health.Part  // the node API's listener (port)
	imports  *health.Part  // the image import watcher
	// collectImages asks the image garbage collector for a pass now (a
	// reload); one slot.
	collectImages chan struct{}
	// memNotifier wakes the eviction manager; nil until there are
	// thresholds.
	memNotifier atomic.Pointer[oci.MemoryNotifier]
	hooks       testHooks // run's hidden test-only flags
}

// readyNotifier remembers that READY=1 was said, so that a reload asked for
// before that does not say it early. With --ready-when, the agent's Ready
// only opens the gate, which says READY=1 once the pods are there.
type readyNotifier struct {
	*sysd.Notifier
	ready      atomic.Bool
	gate       chan struct{} // nil: no gate; else closed by the agent's Ready
	gateOnce   sync.Once
	synced     chan struct{} // closed by the agent's first Ready
	syncedOnce sync.Once
}

// Ready is the agent's: every source seen and the first sync done.
func (n *readyNotifier) Ready() {
	n.syncedOnce.Do(func() { close(n.synced) })
	if n.gate != nil {
		n.gateOnce.Do(func() { close(n.gate) })
		return
	}
	n.SendReady()
}

// SendReady says READY=1.
func (n *readyNotifier) SendReady() {
	n.ready.Store(true)
	n.Notifier.Ready()
}

// reload is systemctl reload (SIGHUP): the configuration is read again and
// what can change live is applied (the rest is reported as needing a
// restart), every source reads its manifests now and every waiting pod tries
// again now.
func (d *daemon) reload() {
	d.logger.Info("reloading: reading the configuration and the manifests now")
	ready := d.notifier.ready.Load()
	if ready {
		d.notifier.Reloading()
	}
	d.reloadConfig()
	d.collectImagesSoon() // with the thresholds a reload may have changed
	d.sources.Relist()
	d.agent.Resync()
	if ready {
		d.status.Status(d.agent.Summary()) // not "Reloading" until the pods change
		d.notifier.SendReady()
	}
}

func runDaemon(cfg *config.Config, flags *config.Flags, hooks testHooks, when ready.When, logger *slog.Logger) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	d, err := newDaemon(ctx, cfg, hooks, logger, false)
	if err != nil {
		return err
	}
	d.flags = flags
	if when.Gated() {
		d.notifier.gate = make(chan struct{})
		d.gate = &ready.Gate{When: when, Node: cfg.NodeName, Pods: d.agent, Notifier: d.notifier, Status: d.status, Extend: readyExtend, Synced: d.notifier.gate}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGHUP {
					d.reload()
					continue
				}
				if waiting := d.status.WaitingFor(); waiting != "" && !d.notifier.ready.Load() {
					// Most likely systemd's start timeout: say what never came.
					logger.Error("stopping before READY=1; pods keep running", "signal", s.String(), "reason", waiting)
					d.notifier.StoppingBecause("never ready: " + waiting)
				} else {
					logger.Info("stopping; pods keep running", "signal", s.String())
					d.notifier.Stopping()
				}
				cancel(errSignal)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	err = d.run(ctx)
	if errors.Is(context.Cause(ctx), errSignal) && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// newDaemon makes every subsystem, the runtime's recovery and checks under
// ctx; once: the sources read the manifests once (run --once).
func newDaemon(ctx context.Context, cfg *config.Config, hooks testHooks, logger *slog.Logger, once bool) (*daemon, error) {
	// The daemon's RSS is what it touches, not 2 MiB around each touch:
	// before the runtime copies the embedded monitor program out of it.
	monitor.SmallPagesForExecutable()
	// Before any pod starts, adopted or new: what would make pods fail.
	if errs := oci.Check(checkConfig(cfg)); len(errs) > 0 {
		for _, err := range errs {
			logger.Error("start-up check failed", "err", err)
		}
		return nil, fmt.Errorf("%d start-up check(s) failed (staticpodd check lists them)", len(errs))
	}
	if err := oci.CheckBuild(); err != nil {
		logger.Warn("containers that need what this build lacks will not start", "err", err)
	}
	for _, dir := range []string{cfg.RootDir, cfg.RunDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	// Before anything looks at the state.
	lock, err := oci.LockRunDir(cfg.RunDir)
	if err != nil {
		return nil, err
	}
	images, err := image.Open(filepath.Join(cfg.RootDir, "images"), logger.With("subsystem", "images"), imageReserve(cfg))
	if err != nil {
		return nil, err
	}
	puller, err := newPuller(cfg, images, logger.With("subsystem", "images"))
	if err != nil {
		return nil, err
	}
	podCIDR, err := netip.ParsePrefix(cfg.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("podCIDR %q: %w", cfg.PodCIDR, err)
	}
	cniCache := cfg.CNICacheDir
	if cniCache == "" {
		cniCache = filepath.Join(cfg.RunDir, "cni", "cache")
	}
	rt, err := oci.New(oci.Config{
		Network: &oci.NetworkConfig{
			ConfDir:  cfg.CNIConfDir,
			BinDirs:  cfg.CNIBinDirs,
			CacheDir: cniCache,
			Bridge:   cfg.PodNetworkBridge,
			Subnet:   podCIDR,
			// Leases live as long as the namespaces they are for: until
			// the pod is removed, or the machine restarts.
			IPAMDir:  filepath.Join(cfg.RunDir, "cni", "networks"),
			OwnPorts: ownPorts(cfg),
		},
		RunDir:       cfg.RunDir,
		RootDir:      cfg.RootDir,
		CgroupRoot:   cfg.CgroupRoot,
		CgroupDriver: cfg.CgroupDriver,
		NodeCgroup:   hooks.nodeCgroup,
		// A negative containerLogMaxSize turns rotation off, as the kubelet's.
		LogMaxSize:  cfg.ContainerLogMaxSize,
		LogMaxFiles: int(cfg.ContainerLogMaxFiles),
		Images:      images,
		Logger:      logger.With("subsystem", "runtime"),
	})
	if err != nil {
		return nil, err
	}
	// Before the agent's first plan: it adopts what the runtime kept.
	if err := rt.Recover(ctx); err != nil {
		return nil, err
	}
	rt.StartBackground(ctx)
	notifier := &readyNotifier{Notifier: sysd.New(logger), synced: make(chan struct{})}
	paths := manifest.Paths{
		RootDir: cfg.RootDir, PodLogsDir: cfg.PodLogsDir,
		SeccompDefault:       cfg.SeccompDefault,
		SafeSysctls:          manifest.SafeSysctls(kernelRelease()),
		AllowedUnsafeSysctls: cfg.AllowedUnsafeSysctls,
		RecursiveReadOnly:    oci.SupportsRecursiveReadOnly(),
		NoSeccomp:            oci.BuildFeatures().SeccompMissing(),
	}
	var nodeIP netip.Addr
	if cfg.NodeIP != "" {
		// Dual-stack "IPv4,IPv6" as the kubelet takes it: the first is the pods' hostIP.
		first, _, _ := strings.Cut(cfg.NodeIP, ",")
		if nodeIP, err = netip.ParseAddr(strings.TrimSpace(first)); err != nil {
			return nil, fmt.Errorf("--node-ip %q: %w", cfg.NodeIP, err)
		}
	}
	// The notifier sends at most one WATCHDOG=1 per interval (half of
	// WatchdogSec); pinging twice as often keeps timer jitter from skipping one.
	watchdog := notifier.WatchdogInterval() / 2
	seen := agent.NewSeenStore(paths)
	aux := &health.Parts{Logger: logger}
	status := health.NewLine(notifier, aux)
	d := &daemon{cfg: cfg, logger: logger, notifier: notifier, status: status, aux: aux, images: images, runtime: rt, lock: lock, collectImages: make(chan struct{}, 1), hooks: hooks}
	d.seen = seen
	d.sources = source.NewMux()
	var sourceNames []string
	if cfg.StaticPodPath != "" {
		d.sources.Set(manifest.SourceFile, d.newFileSource(cfg, once))
		sourceNames = append(sourceNames, manifest.SourceFile)
	}
	if cfg.StaticPodURL != "" {
		src := d.sources.Set(manifest.SourceHTTP, d.newURLSource(cfg, once))
		aux.URL.Store(src.URL)
		sourceNames = append(sourceNames, manifest.SourceHTTP)
	} else {
		d.forgetURL(cfg)
	}
	d.agent = agent.New(agent.Config{
		NodeName:       cfg.NodeName,
		NodeIP:         nodeIP,
		Sources:        sourceNames,
		Paths:          paths,
		SyncFrequency:  cfg.SyncFrequency,
		BackoffMax:     cfg.MaxContainerRestartPeriod,
		PodPidsLimit:   cfg.PodPidsLimit,
		ResolvConf:     cfg.ResolvConf,
		WatchdogPeriod: watchdog,
		Notifier:       agentNotifier{readyNotifier: notifier, line: status},
		Seen:           seen,
		Eviction:       d.evictionConfig(),
		Images:         imagePuller{store: images, puller: puller},
	}, rt, logger)
	if cfg.Kubeconfig != "" && !once {
		d.mirror = mirror.New(mirror.Config{
			Kubeconfig:                cfg.Kubeconfig,
			NodeName:                  cfg.NodeName,
			NodeIP:                    nodeIP,
			Version:                   versionString(),
			KubeletPort:               cfg.Port,
			RegisterNode:              cfg.RegisterNode,
			RegisterWithTaints:        cfg.RegisterWithTaints,
			NodeStatusUpdateFrequency: cfg.NodeStatusUpdateFrequency,
			NodeStatusReportFrequency: cfg.NodeStatusReportFrequency,
			NodeLeaseDuration:         time.Duration(cfg.NodeLeaseDurationSeconds) * time.Second,
			MaxPods:                   int64(cfg.MaxPods),
			RootDir:                   cfg.RootDir,
			EvictionHard:              cfg.EvictionHard,
			Conditions:                d.agent,
			OnChange:                  status.Refresh,
		}, mirror.AgentPods{Agent: d.agent}, logger.With("subsystem", "mirror"))
		aux.Mirror = d.mirror
	}
	d.readOnly = aux.Add("read-only-port", "read-only port")
	d.nodePort = aux.Add("node-api", "node API (port)")
	d.imports = aux.Add("image-import", "image import watcher")
	return d, nil
}

// evictionThresholds is the eviction manager's part of cfg: the thresholds
// and their periods, which a reload changes.
func evictionThresholds(cfg *config.Config) eviction.Config {
	ts, _ := cfg.EvictionThresholds() // validated by config.Load
	return eviction.Config{
		Thresholds:               ts,
		PressureTransitionPeriod: cfg.EvictionPressureTransitionPeriod,
		MaxPodGracePeriod:        time.Duration(cfg.EvictionMaxPodGracePeriod) * time.Second,
	}
}

// evictionConfig is the eviction manager's configuration: the thresholds,
// the memory threshold notifier (made once there are thresholds), and
// node-level reclaim of unused images.
func (d *daemon) evictionConfig() agent.EvictionConfig {
	ec := agent.EvictionConfig{Config: evictionThresholds(d.cfg)}
	importDir := filepath.Join(d.cfg.RootDir, "images", "import")
	ec.Reclaim = func(ctx context.Context, keep []string) (uint64, error) {
		freed, removed, err := d.images.RemoveUnused(keep, importDir)
		if len(removed) > 0 {
			d.logger.Info("removed unused images", "images", removed, "bytes", freed)
		}
		return freed, err
	}
	if d.hooks.noMemoryNotifier {
		return ec
	}
	ec.NewNotifier = func() (agent.MemoryNotifier, error) {
		mn, err := d.runtime.NewMemoryNotifier()
		if err != nil {
			return nil, err
		}
		d.memNotifier.Store(mn)
		return mn, nil
	}
	return ec
}

// run starts every subsystem under one errgroup and returns when ctx ends or one
// of them fails.
func (d *daemon) run(ctx context.Context) error {
	d.cfgMu.Lock()
	cfg := d.cfg // what run reads does not change live
	d.cfgMu.Unlock()
	defer d.lock.Close()
	// The runtime's own goroutines end; its pods and monitors keep running.
	defer d.runtime.Close()
	defer func() { // after the agent, which made it, has returned
		if mn := d.memNotifier.Load(); mn != nil {
			mn.Close()
		}
	}()
	importDir := filepath.Join(cfg.RootDir, "images", "import")
	if err := os.MkdirAll(importDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", importDir, err)
	}
	// Sockets systemd passed (socket activation, see packaging/staticpodd.socket),
	// by FileDescriptorName: "cli" and "read-only"; the daemon opens the others.
	passed, err := sysd.NamedListeners()
	if err != nil {
		d.logger.Warn("socket activation: passed sockets not used", "err", err)
	}
	sock := firstListener(passed[listenerCLI])
	if sock == nil {
		if sock, err = server.ListenUnix(filepath.Join(cfg.RunDir, "staticpodd.sock")); err != nil {
			return err
		}
	} else {
		d.logger.Info("serving the CLI on a socket systemd passed", "address", sock.Addr().String())
	}
	g, ctx := errgroup.WithContext(ctx)
	httpLog := d.logger.With("subsystem", "http")
	files := openFileLimit()
	cliLimits := server.DefaultLimits(server.CLIMaxConns).FitFiles(files)
	g.Go(func() error {
		return server.Serve(ctx, sock, server.CLI(served{d.agent, d.aux}, httpLog), cliLimits, httpLog.With("listener", "cli"))
	})
	updates := make(chan source.Update)
	g.Go(func() error { return d.sources.Run(ctx, updates) })
	g.Go(func() error { return d.agent.Run(ctx, updates) })
	if d.gate != nil {
		d.gate.Start(ctx) // never fails
		defer d.gate.Stop()
	}

	// Auxiliary parts: their failures are retried, never returned.
	g.Go(func() error {
		d.aux.Retry(ctx, d.imports, func(ctx context.Context) error {
			return d.images.WatchImports(ctx, importDir, func([]image.Image) { d.agent.Resync() })
		})
		return nil
	})
	g.Go(func() error { d.runImageGC(ctx, importDir); return nil })
	g.Go(func() error {
		var gc trim.RestGC
		trim.WhenQuiet(ctx, d.agent.Events(), d.notifier.synced, func() { gc.Rest(); monitor.TrimMemory() }, gc.Wake)
		return nil
	})
	if d.mirror != nil {
		g.Go(func() error { return d.mirror.Run(ctx) })
	}

	if l := firstListener(passed[listenerReadOnly]); l != nil {
		lim := server.DefaultLimits(server.ReadOnlyMaxConns).FitFiles(files)
		d.logger.Info("serving the read-only port on a socket systemd passed", "address", l.Addr().String(), "maxConns", lim.MaxConns)
		g.Go(func() error {
			return server.Serve(ctx, l, server.ReadOnly(served{d.agent, d.aux}, httpLog), lim, httpLog.With("listener", "read-only port"))
		})
	} else if cfg.ReadOnlyPort != 0 {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
		lim := server.DefaultLimits(server.ReadOnlyMaxConns).FitFiles(files)
		g.Go(func() error {
			d.aux.Retry(ctx, d.readOnly, func(ctx context.Context) error {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return err
				}
				d.logger.Info("serving the read-only port", "address", addr, "maxConns", lim.MaxConns)
				d.aux.SetPart(d.readOnly, nil)
				return server.Serve(ctx, l, server.ReadOnly(served{d.agent, d.aux}, httpLog), lim, httpLog.With("listener", "read-only port"))
			})
			return nil
		})
	}
	if !nodeAPIServed(d.cfg) {
		d.logger.Info("node API not served", "reason", errNodeAPIOff.Error())
	} else {
		g.Go(func() error { d.serveNodeAPI(ctx, files); return nil })
	}
	return g.Wait()
}

// The FileDescriptorName= of sockets a socket unit passes to the daemon.
const (
	listenerCLI      = "cli"
	listenerReadOnly = "read-only"
)

// firstListener is the first of ls, or nil: one socket is served per
// listener, and any further one of the same name is left unused.
func firstListener(ls []net.Listener) net.Listener {
	for _, l := range ls {
		if l != nil {
			return l
		}
	}
	return nil
}

// openFileLimit is the daemon's limit on open files (the Go runtime raised
// the soft limit to the hard one at start), which caps each listener's
// connections.
func openFileLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return unix.RLIM_INFINITY
	}
	return lim.Cur
}

// kernelRelease is uname -r, for the sysctls the kernel namespaces; "" if
// unknown.
func kernelRelease() string {
	r, _ := host.KernelRelease()
	return r
}

// ownPorts are the TCP ports the daemon listens on: the node API's port when
// it is served, the read-only port when it is on.
func ownPorts(cfg *config.Config) []oci.OwnPort {
	var ps []oci.OwnPort
	if nodeAPIServed(cfg) && cfg.Port != 0 {
		ps = append(ps, oci.OwnPort{Name: "port", Address: cfg.Address, Port: cfg.Port})
	}
	if cfg.ReadOnlyPort != 0 {
		ps = append(ps, oci.OwnPort{Name: "readOnlyPort", Address: cfg.Address, Port: cfg.ReadOnlyPort})
	}
	return ps
}
