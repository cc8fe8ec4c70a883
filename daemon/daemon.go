// Package daemon is the wiring of `staticpodd run`: System makes every part
// from the configuration (the image store and puller, the runtime, the
// sources, the agent, the mirror, the listeners, the readiness gate, the
// image garbage collector), starts the components in order, reloads on
// SIGHUP and stops them in reverse on SIGTERM. It is the one package that
// knows both sides, agent/ and oci/; cmd/staticpodd only parses flags and
// calls Run or Once.
package daemon

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

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/component"
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
	"github.com/staticpodd/staticpodd/oci/bundle"
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

// SocketName is the CLI socket under --run-dir.
const SocketName = "staticpodd.sock"

// System is every part of a running staticpodd, made from the
// configuration by one constructor: the wiring, as tailscale's tsd.System.
// Only this package knows them all; the parts with a lifecycle run as
// components, started in order and stopped in reverse (docs/architecture.md,
// "The wiring").
type System struct {
	components *component.Manager
	cfgMu      sync.Mutex     // guards cfg, which a reload replaces
	cfg        *config.Config // what runs: a reload's new value of each live field
	logger     *slog.Logger
	notifier   *readyNotifier
	status     *health.Line // STATUS=: the agent's summary and the auxiliary parts' trouble
	aux        *health.Parts
	images     *image.Store
	puller     *image.Puller
	runtime    *oci.Runtime
	agent      *agent.Agent
	mirror     *mirror.Mirror // mirror pods and the Node; nil without a kubeconfig
	// credentials are the mirror's and the node API's reviews'; nil
	// without a kubeconfig.
	credentials *mirror.Credentials
	seen        *agent.SeenStore
	sources     *source.Mux   // the manifest sources: the file's, the URL's, the bundle's
	trial       *bundleTrial  // judges the bundle on trial; nil for run --once
	flags       *config.Flags // the flags of the start, for a reload; nil for run --once
	gate        *ready.Gate   // --ready-when's; nil when READY=1 follows the first sync
	readOnly    *health.Part  // the read-only port's listener
	healthz     *health.Part  // the healthz port's listener
	nodePort    *health.Part  // the node API's listener (port)
	criPart     *health.Part  // the CRI socket's listener
	imports     *health.Part  // the image import watcher
	imageGC     *imageGC      // the image garbage collector; run only, not run --once
	// memNotifier wakes the eviction manager; nil until there are
	// thresholds.
	memNotifier atomic.Pointer[oci.MemoryNotifier]
	opts        Options
}

// Options are what run takes besides the configuration.
type Options struct {
	// Flags are the flags of the start, which a reload reads again with
	// the configuration file; nil for run --once.
	Flags *config.Flags
	// ReadyWhen is --ready-when: what READY=1 waits for.
	ReadyWhen ready.When
	// Version is the daemon's, as the Node and SubjectAccessReviews say it.
	Version string
	// NodeCgroup and NoMemoryNotifier are run's hidden test-only flags
	// (docs/configuration.md, "Test-only settings"): a cgroupfs cgroup whose
	// limits stand for the node's, and no memory threshold notifier.
	NodeCgroup       string
	NoMemoryNotifier bool
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

// The agent waits for container exits without a goroutine per container
// when its runtime can call it back.
var _ agent.ExitNotifier = (*oci.Runtime)(nil)

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
func (d *System) reload() {
	d.logger.Info("reloading: reading the configuration and the manifests now")
	ready := d.notifier.ready.Load()
	if ready {
		d.notifier.Reloading()
	}
	d.reloadConfig()
	d.sources.Relist()
	d.agent.Resync()
	if ready {
		d.status.Status(d.agent.Summary()) // not "Reloading" until the pods change
		d.notifier.SendReady()
	}
}

// Run is `staticpodd run`: it makes the System, starts its components and
// keeps them running until SIGTERM or SIGINT (nil) or one of them fails;
// SIGHUP reloads. The pods keep running when it returns.
func Run(cfg *config.Config, opts Options, logger *slog.Logger) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	d, err := newSystem(ctx, cfg, opts, logger, false)
	if err != nil {
		return err
	}
	// Before the signals: every reload reaches them (Reconcile). The image
	// garbage collector, last, collects from the agent's first sync.
	for _, c := range d.reconcilers() {
		if err := d.components.Start(c); err != nil {
			d.components.Stop()
			return err
		}
	}
	if when := opts.ReadyWhen; when.Gated() {
		d.notifier.gate = make(chan struct{})
		d.gate = &ready.Gate{When: when, Node: cfg.NodeName, Pods: d.agent, Notifier: d.notifier, Status: d.status, Extend: readyExtend, Synced: d.notifier.gate}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
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
	err = d.run()
	if errors.Is(context.Cause(ctx), errSignal) && (err == nil || errors.Is(err, context.Canceled)) {
		err = nil
	}
	cancel(nil) // the signal handler ends, after a reload it is in
	<-handled
	return err
}

// newSystem makes every part, and starts the first components under ctx:
// the run directory's lock before anything looks at the state, then the
// runtime's recovery before the agent's first plan. once: the sources read
// the manifests once (run --once). When it fails, the components it started
// are stopped.
func newSystem(ctx context.Context, cfg *config.Config, opts Options, logger *slog.Logger, once bool) (_ *System, err error) {
	if err := notDumpable(); err != nil {
		return nil, fmt.Errorf("make the daemon non-dumpable: %w", err)
	}
	// The daemon's RSS is what it touches, not 2 MiB around each touch:
	// before the runtime copies the embedded monitor program out of it.
	monitor.SmallPagesForExecutable()
	// What the package initializers touched of the binary, before the pods
	// of the first sync touch what they need of it.
	monitor.DropInitPages()
	// Before any pod starts, adopted or new: what would make pods fail.
	if errs := oci.Check(CheckConfig(cfg)); len(errs) > 0 {
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
	components := component.NewManager(ctx)
	defer func() {
		if err != nil {
			components.Stop()
		}
	}()
	// Before anything looks at the state.
	if err := components.Start(&runDirLock{dir: cfg.RunDir}); err != nil {
		return nil, err
	}
	// The image policy before anything can bring an image in: the import
	// folder, a pull, the CRI.
	images, err := openImages(cfg, logger.With("subsystem", "images"))
	if err != nil {
		return nil, err
	}
	puller, err := NewPuller(cfg, images, logger.With("subsystem", "images"))
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
		NodeCgroup:   opts.NodeCgroup,
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
	if err := components.Start(runtimeComponent{rt}); err != nil {
		return nil, err
	}
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
	d := &System{components: components, cfg: cfg, logger: logger, notifier: notifier, status: status, aux: aux, images: images, puller: puller, runtime: rt, flags: opts.Flags, opts: opts}
	d.seen = seen
	d.sources = source.NewMux()
	var sourceNames []string
	if cfg.StaticPodPath != "" {
		d.sources.Set(manifest.SourceFile, d.newFileSource(cfg, once))
		sourceNames = append(sourceNames, manifest.SourceFile)
	}
	// The bundle the node runs, if any (bundle apply, or a manifest URL
	// that serves a bundle): not read by run --once, which runs the
	// configured manifests only.
	withBundles := !once && cfg.MissingConfig == ""
	if withBundles {
		d.trial = newBundleTrial(cfg.RootDir, images, logger.With("subsystem", "bundle"))
		d.sources.Set(manifest.SourceBundle, d.newBundleSource(cfg))
		d.trial.relist = func() {
			if src := d.sources.Get(manifest.SourceBundle); src != nil {
				src.Relist()
			}
		}
		sourceNames = append(sourceNames, manifest.SourceBundle)
	}
	if cfg.StaticPodURL != "" {
		src := d.sources.Set(manifest.SourceHTTP, d.newURLSource(cfg, once))
		aux.URL.Store(src.URL)
		sourceNames = append(sourceNames, manifest.SourceHTTP)
	} else {
		d.forgetURL(cfg)
	}
	if cfg.MissingConfig != "" {
		// The kubelet personality before kubeadm has written its
		// configuration (config.Config.MissingConfig): the pods found running
		// wait for the manifest source the configuration will name, which
		// this run never has, instead of being removed as wanted by no source.
		sourceNames = []string{manifest.SourceFile}
	}
	d.agent = agent.New(agent.Config{
		NodeName:       cfg.NodeName,
		NodeIP:         nodeIP,
		Sources:        sourceNames,
		Paths:          paths,
		SyncFrequency:  cfg.SyncFrequency,
		RelistPeriod:   cfg.FileCheckFrequency,
		BackoffMax:     cfg.MaxContainerRestartPeriod,
		PodPidsLimit:   cfg.PodPidsLimit,
		ResolvConf:     cfg.ResolvConf,
		WatchdogPeriod: watchdog,
		Notifier:       agentNotifier{readyNotifier: notifier, line: status},
		Seen:           seen,
		Eviction:       d.evictionConfig(),
		Images:         imagePuller{store: images, puller: puller},
		Tags:           imagePuller{store: images, puller: puller},
	}, rt, logger)
	if d.trial != nil {
		d.trial.agent = d.agent
	}
	if cfg.Kubeconfig != "" {
		d.credentials = mirror.NewCredentials(mirror.CredentialsConfig{
			Kubeconfig:          cfg.Kubeconfig,
			BootstrapKubeconfig: cfg.BootstrapKubeconfig,
			CertDir:             cfg.CertDir,
			NodeName:            cfg.NodeName,
			Rotate:              cfg.RotateCertificates,
			Version:             opts.Version,
		}, logger.With("subsystem", "credentials"))
	}
	if cfg.Kubeconfig != "" && !once {
		d.mirror = mirror.New(mirror.Config{
			Credentials:               d.credentials,
			NodeName:                  cfg.NodeName,
			NodeIP:                    nodeIP,
			Version:                   opts.Version,
			KubeletPort:               cfg.Port,
			RegisterNode:              cfg.RegisterNode,
			RegisterWithTaints:        cfg.RegisterWithTaints,
			RegisterSchedulable:       cfg.RegisterSchedulable,
			NodeLabels:                cfg.NodeLabels,
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
	d.healthz = aux.Add("healthz-port", "healthz port")
	d.nodePort = aux.Add("node-api", "node API (port)")
	d.criPart = aux.Add("cri", "CRI socket")
	d.imports = aux.Add("image-import", "image import watcher")
	d.imageGC = &imageGC{
		store: images, agent: d.agent, logger: logger, importDir: importDir(cfg), synced: notifier.synced,
		collect: make(chan struct{}, 1),
	}
	d.imageGC.setPolicy(cfg)
	return d, nil
}

// config is the configuration that runs now.
func (d *System) config() *config.Config {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	return d.cfg
}

// importDir is the image import folder: images dropped there are imported.
func importDir(cfg *config.Config) string {
	return filepath.Join(cfg.RootDir, "images", "import")
}

// runDirLock holds <run-dir>/staticpodd.lock (flock(2)) while the daemon
// runs: the first component, before anything looks at the state.
type runDirLock struct {
	dir string
	f   *os.File
}

func (l *runDirLock) Start(context.Context) (err error) {
	l.f, err = oci.LockRunDir(l.dir)
	return err
}

func (l *runDirLock) Stop() { l.f.Close() }

// runtimeComponent is the runtime as a component: Start recovers what an
// earlier daemon left (Recover) and starts the runtime's own goroutines
// (Start); Stop ends them (Close). Its pods and monitors keep running.
// The runtime's start is two steps, and a failure is Recover's, so the
// runtime is no component of its own; its part of a reload is
// liveLogRotation's.
type runtimeComponent struct{ rt *oci.Runtime }

func (r runtimeComponent) Start(ctx context.Context) error {
	if err := r.rt.Recover(ctx); err != nil {
		return err
	}
	r.rt.Start(ctx)
	return nil
}

func (r runtimeComponent) Stop() { r.rt.Close() }

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
func (d *System) evictionConfig() agent.EvictionConfig {
	ec := agent.EvictionConfig{Config: evictionThresholds(d.cfg)}
	importDir := importDir(d.cfg)
	ec.Reclaim = func(ctx context.Context, keep []string) (uint64, error) {
		freed, removed, err := d.images.RemoveUnused(keep, importDir)
		if len(removed) > 0 {
			d.logger.Info("removed unused images", "images", removed, "bytes", freed)
		}
		return freed, err
	}
	if d.opts.NoMemoryNotifier {
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

// run starts the components that serve and keep the pods, in order, and
// returns when ctx ends or one of them fails; then it stops every component,
// the runtime and the run directory's lock last.
func (d *System) run() error {
	err := d.startAll()
	if err == nil {
		d.components.Wait()
	}
	if stopErr := d.components.Stop(); err == nil {
		err = stopErr
	}
	return err
}

// startAll starts the components that run beside the pods, in order: the
// CLI socket, the sources, the agent, the readiness gate, then the
// auxiliary parts, whose failures are retried, never returned.
func (d *System) startAll() error {
	cfg := d.config() // what run reads does not change live
	importDir := importDir(cfg)
	if err := os.MkdirAll(importDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", importDir, err)
	}
	// Made before the bundle source watches it.
	if err := os.MkdirAll(bundle.Dir(cfg.RootDir), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", bundle.Dir(cfg.RootDir), err)
	}
	// Sockets systemd passed (socket activation, see packaging/staticpodd.socket),
	// by FileDescriptorName: "cli", "read-only" and "cri"; the daemon opens the
	// others.
	passed, err := sysd.NamedListeners()
	if err != nil {
		d.logger.Warn("socket activation: passed sockets not used", "err", err)
	}
	sock := firstListener(passed[listenerCLI])
	if sock == nil {
		if sock, err = server.ListenUnix(filepath.Join(cfg.RunDir, SocketName)); err != nil {
			return err
		}
	} else {
		d.logger.Info("serving the CLI on a socket systemd passed", "address", sock.Addr().String())
	}
	m := d.components
	httpLog := d.logger.With("subsystem", "http")
	files := openFileLimit()
	cliLimits := server.DefaultLimits(server.CLIMaxConns).FitFiles(files)
	start := func(run func(ctx context.Context) error) error { return m.Start(component.NewTask(run)) }
	if err := start(func(ctx context.Context) error {
		return server.Serve(ctx, sock, server.CLI(served{d.agent, d.aux}, httpLog), cliLimits, httpLog.With("listener", "cli"))
	}); err != nil {
		return err
	}
	updates := make(chan source.Update)
	if err := start(func(ctx context.Context) error { return d.sources.Run(ctx, updates) }); err != nil {
		return err
	}
	// Stopped once the agent, which made it, has returned.
	if err := m.Start(onStop(func() {
		if mn := d.memNotifier.Load(); mn != nil {
			mn.Close()
		}
	})); err != nil {
		return err
	}
	if err := start(func(ctx context.Context) error { return d.agent.Run(ctx, updates) }); err != nil {
		return err
	}
	if d.gate != nil {
		if err := m.Start(d.gate); err != nil {
			return err
		}
	}

	// One set of registries for the read-only port and the node API, as the
	// kubelet's: /metrics counts the requests of both.
	metrics := server.NewMetrics(served{d.agent, d.aux})
	// Auxiliary parts: their failures are retried, never returned.
	aux := []component.Component{
		component.NewTask(func(ctx context.Context) error {
			d.aux.Retry(ctx, d.imports, func(ctx context.Context) error {
				return d.images.WatchImports(ctx, importDir, func([]image.Image) { d.agent.Resync() })
			})
			return nil
		}),
		component.NewTask(func(ctx context.Context) error {
			var gc trim.RestGC
			trim.WhenQuiet(ctx, d.agent.Events(), d.notifier.synced, func() { monitor.TrimMemory(); gc.Rest() }, monitor.DropExecutablePages, gc.Wake)
			return nil
		}),
	}
	if d.mirror != nil {
		aux = append(aux, component.NewTask(d.mirror.Run))
	}
	if d.trial != nil {
		aux = append(aux, component.NewTask(d.trial.run))
	}
	if l := firstListener(passed[listenerReadOnly]); l != nil {
		lim := server.DefaultLimits(server.ReadOnlyMaxConns).FitFiles(files)
		d.logger.Info("serving the read-only port on a socket systemd passed", "address", l.Addr().String(), "maxConns", lim.MaxConns)
		aux = append(aux, component.NewTask(func(ctx context.Context) error {
			return server.Serve(ctx, l, server.ReadOnly(served{d.agent, d.aux}, metrics, httpLog), lim, httpLog.With("listener", "read-only port"))
		}))
	} else if cfg.ReadOnlyPort != 0 {
		addr := net.JoinHostPort(cfg.ReadOnlyAddress(), strconv.Itoa(int(cfg.ReadOnlyPort)))
		lim := server.DefaultLimits(server.ReadOnlyMaxConns).FitFiles(files)
		aux = append(aux, component.NewTask(func(ctx context.Context) error {
			d.aux.Retry(ctx, d.readOnly, func(ctx context.Context) error {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return err
				}
				d.logger.Info("serving the read-only port", "address", addr, "maxConns", lim.MaxConns)
				d.aux.SetPart(d.readOnly, nil)
				return server.Serve(ctx, l, server.ReadOnly(served{d.agent, d.aux}, metrics, httpLog), lim, httpLog.With("listener", "read-only port"))
			})
			return nil
		}))
	}
	criSock := firstListener(passed[listenerCRI])
	aux = append(aux, component.NewTask(func(ctx context.Context) error { d.serveCRI(ctx, criSock); return nil }))
	if cfg.HealthzPort != 0 {
		// The kubelet's healthz port, which kubeadm polls: opened after the
		// agent has started, as the kubelet opens it after RunKubelet, and
		// retried while its address is taken (the kubelet tries every 5s).
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(cfg.HealthzPort)))
		lim := server.DefaultLimits(server.HealthzMaxConns).FitFiles(files)
		aux = append(aux, component.NewTask(func(ctx context.Context) error {
			d.aux.Retry(ctx, d.healthz, func(ctx context.Context) error {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return err
				}
				d.logger.Info("serving the healthz port", "address", addr, "maxConns", lim.MaxConns)
				d.aux.SetPart(d.healthz, nil)
				return server.Serve(ctx, l, server.HealthzPort(), lim, httpLog.With("listener", "healthz port"))
			})
			return nil
		}))
	}
	if err := nodeAPIOff(d.cfg); err != nil {
		d.logger.Info("node API not served", "reason", err.Error())
	} else {
		aux = append(aux, component.NewTask(func(ctx context.Context) error { d.serveNodeAPI(ctx, files, metrics); return nil }))
	}
	for _, c := range aux {
		if err := m.Start(c); err != nil {
			return err
		}
	}
	if cfg.MissingConfig != "" {
		// The first sync waits for a source this run never has: ready now,
		// so that systemd's start (a CRI call activating kubelet.service)
		// completes.
		d.logger.Warn(cfg.MissingConfig + " is not there yet (kubeadm init or join writes it): serving the CRI only")
		d.notifier.SendReady()
		d.status.Status("serving the CRI only: " + cfg.MissingConfig + " is not there yet")
	}
	return nil
}

// onStop is a component that only does stop when it is stopped.
type onStop func()

func (onStop) Start(context.Context) error { return nil }
func (f onStop) Stop()                     { f() }

// The FileDescriptorName= of sockets a socket unit passes to the daemon.
const (
	listenerCLI      = "cli"
	listenerReadOnly = "read-only"
	// listenerCRI: staticpodd-kubeadm's staticpodd-cri.socket, so that a CRI
	// call starts kubelet.service (kubeadm reset calls the CRI after it has
	// stopped the kubelet).
	listenerCRI = "cri"
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
// it is served, the read-only port and the healthz port when they are on.
func ownPorts(cfg *config.Config) []oci.OwnPort {
	var ps []oci.OwnPort
	if nodeAPIOff(cfg) == nil && cfg.Port != 0 {
		ps = append(ps, oci.OwnPort{Name: "port", Address: cfg.Address, Port: cfg.Port})
	}
	if cfg.ReadOnlyPort != 0 {
		ps = append(ps, oci.OwnPort{Name: "readOnlyPort", Address: cfg.ReadOnlyAddress(), Port: cfg.ReadOnlyPort})
	}
	if cfg.HealthzPort != 0 {
		ps = append(ps, oci.OwnPort{Name: "healthzPort", Address: cfg.HealthzBindAddress, Port: cfg.HealthzPort})
	}
	return ps
}
