//go:build linux && cgo

package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runc/libcontainer/system"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"golang.org/x/sys/unix"
)

// StartArg is argv[1] of a monitor process. Its command line is
//
//	staticpodd-monitor __staticpodd_monitor <libcontainer-root> <state-dir> <id>
//
// with the report pipe as fd 3 and the go pipe as fd 4. A monitor is started
// ahead of its container (see pendingMonitor): it waits until the daemon
// writes a byte to the go pipe, which says <state-dir> holds the container's
// spec and record, then sends its own log (stdout, stderr) to
// <state-dir>/monitor.log. After the byte, up to EOF, come the values of the
// container's sensitive environment (EncodeSecretEnv), which its spec lacks.
// EOF on the go pipe before the byte means the container is not wanted after
// all: the monitor exits.
const StartArg = "__staticpodd_monitor"

// Name is argv[0] of every monitor role: find them with
// pgrep -f '^staticpodd-monitor'.
const Name = "staticpodd-monitor"

// The points where a test stops a monitor to see what the daemon does with
// one that stands still there (pauseAt): PauseRun once it wrote its state and
// before it creates the container, PauseExec once the container's init waits
// on runc's exec FIFO and before the monitor opens it, PauseDestroy once it
// recorded the exit and before it destroys the container.
const (
	PauseRun     = "run"
	PauseExec    = "exec"
	PauseDestroy = "destroy"
)

// runMonitor is the monitor's main: it creates and runs the container, copies
// its output to the CRI log, records its exit and destroys it. It needs no
// daemon once it has reported.
func runMonitor(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(args) != 3 {
		log.Error("monitor: want <libcontainer-root> <state-dir> <id>", "args", args)
		return 2
	}
	// No collection while the container starts: what the start allocates
	// (a few MiB) is garbage once the container runs, when trimMemory frees
	// it, and a collection before then is CPU that a burst of starts pays
	// for on every monitor. The limit bounds a start that allocates more.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(startMemoryLimit)
	m := &monitorProc{root: args[0], dir: args[1], id: args[2], report: os.NewFile(3, "report")}
	m.log = log.With("container", m.id)
	// Before the state says RotationReload: SIGHUP would kill us.
	m.hup = make(chan os.Signal, 1)
	signal.Notify(m.hup, unix.SIGHUP)
	log = log.With("container", m.id)
	st, err := m.prepare()
	secret, ok, werr := m.wait(os.NewFile(4, "go"))
	if !ok {
		return 0
	}
	if err == nil {
		err = werr
	}
	if err == nil {
		err = m.redirectLog()
	}
	var env []string
	if err == nil && len(secret) > 0 {
		env, st.SecretEnvFd, err = takeSecretEnv(secret)
	}
	if err == nil {
		err = m.run(st, env, log)
	}
	if err != nil {
		if m.report != nil && !m.exitWritten {
			// The container never started: a daemon that was down when it
			// failed sees why, as the one waiting for the report does.
			if werr := m.writeExit(startFailure(err)); werr != nil {
				err = errors.Join(err, werr)
			}
		}
		m.sendReport(Report{Error: err.Error()})
		log.Error("monitor failed", "err", cutMessage(err.Error()))
		return 1
	}
	return 0
}

type monitorProc struct {
	log           *slog.Logger
	root, dir, id string
	report        *os.File // nil once reported
	exitWritten   bool
	hup           chan os.Signal // SIGHUP: read RotationFile again
}

// startFailure is the exit recorded for a container that failed to start:
// 128, as runc's, with the error as its message.
func startFailure(err error) ExitRecord {
	return ExitRecord{ExitCode: 128, Reason: ReasonStartError, FinishedAt: time.Now(), Message: cutMessage(err.Error())}
}

func (m *monitorProc) writeExit(exit ExitRecord) error {
	if err := WriteJSON(filepath.Join(m.dir, ExitFile), exit); err != nil {
		return err
	}
	m.exitWritten = true
	return nil
}

func (m *monitorProc) sendReport(rep Report) {
	if m.report == nil {
		return
	}
	// The daemon may be gone; its absence must not stop the container.
	rep.Error = cutMessage(rep.Error)
	_ = json.NewEncoder(m.report).Encode(rep)
	_ = m.report.Close()
	m.report = nil
}

// prepare does what needs no container, while the daemon still writes its
// spec.
func (m *monitorProc) prepare() (State, error) {
	// The container's init is reparented to us when libcontainer's
	// intermediate processes exit, so that we can wait for it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return State{}, fmt.Errorf("become subreaper: %w", err)
	}
	self, err := system.Stat(os.Getpid())
	if err != nil {
		return State{}, fmt.Errorf("stat monitor: %w", err)
	}
	warmUp()
	return State{MonitorPid: os.Getpid(), MonitorStart: self.StartTime, RotationReload: true}, nil
}

// warmUp does, while the monitor waits, the one-time work that its container's
// start would otherwise pay for: encoding/json's type caches for the spec and
// libcontainer's state (encoding builds them for the whole type graph, and
// decoding shares them; cold, reading the spec took ~0.8 ms instead of ~0.15
// here) and the cgroup mode probe.
func warmUp() {
	_, _ = json.Marshal(&specs.Spec{})
	_, _ = json.Marshal(&libcontainer.State{})
	_ = cgroups.IsCgroup2UnifiedMode()
}

// startMemoryLimit is where a monitor's heap is collected while its
// container starts (otherwise it is not): far above what a start allocates.
const startMemoryLimit = 64 << 20

// spareAfter is how long a monitor waits for its go before it takes itself
// for a spare (one started ahead for the next container) and gives back what
// start-up touched.
const spareAfter = time.Second

// wait blocks until the daemon says go (true) or gives the container up
// (false). With the go, it returns the container's sensitive environment, as
// the daemon wrote it after the go byte (EncodeSecretEnv), or why it could
// not be read.
func (m *monitorProc) wait(goPipe *os.File) ([]byte, bool, error) {
	defer goPipe.Close()
	type said struct {
		secret []byte
		ok     bool
		err    error
	}
	ch := make(chan said, 1)
	go func() {
		var b [1]byte
		if n, _ := goPipe.Read(b[:]); n != 1 {
			ch <- said{}
			return
		}
		secret, err := io.ReadAll(io.LimitReader(goPipe, MaxSecretEnv+1))
		if err == nil && len(secret) > MaxSecretEnv {
			err = fmt.Errorf("secret env: more than %d bytes", MaxSecretEnv)
		}
		ch <- said{secret, true, err}
	}()
	t := time.NewTimer(spareAfter)
	defer t.Stop()
	var s said
	select {
	case s = <-ch:
	case <-t.C:
		trimMemory()
		s = <-ch
	}
	return s.secret, s.ok, s.err
}

// takeSecretEnv decodes the sensitive environment the daemon sent and keeps
// it in a sealed memfd (keepSecretEnv). The monitor is made non-dumpable
// first: a core dump of it would hold the values.
func takeSecretEnv(b []byte) ([]string, int, error) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, 0, fmt.Errorf("make the monitor non-dumpable: %w", err)
	}
	env, err := DecodeSecretEnv(b)
	if err != nil {
		return nil, 0, err
	}
	fd, err := keepSecretEnv(b)
	if err != nil {
		return nil, 0, err
	}
	return env, fd, nil
}

// redirectLog points the monitor's stdout and stderr at its container's
// monitor.log.
func (m *monitorProc) redirectLog() error {
	f, err := os.OpenFile(filepath.Join(m.dir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open monitor log: %w", err)
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("redirect monitor output to %s: %w", f.Name(), err)
		}
	}
	return nil
}

// run runs the container of the spec in m.dir, with secret (NAME=value)
// filled in for the bare names of its process's environment (FillEnv).
func (m *monitorProc) run(st State, secret []string, log *slog.Logger) error {
	// The state names this monitor, so that a new daemon can adopt it. Its
	// fsync overlaps reading and converting the spec; it lands before the
	// container's process exists.
	stateWritten := make(chan error, 1)
	go func() { stateWritten <- WriteJSON(filepath.Join(m.dir, StateFile), st) }()
	waitState := func() error {
		if stateWritten == nil {
			return nil
		}
		err := <-stateWritten
		stateWritten = nil
		return err
	}
	defer waitState()
	var rec containerLog
	if err := ReadJSON(filepath.Join(m.dir, ContainerFile), &rec); err != nil {
		return fmt.Errorf("read container record: %w", err)
	}
	var s specs.Spec
	if err := ReadJSON(filepath.Join(m.dir, SpecFile), &s); err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	if s.Process == nil {
		return fmt.Errorf("spec of container %s has no process", m.id)
	}
	env, err := FillEnv(s.Process.Env, secret)
	if err != nil {
		return fmt.Errorf("container %s: %w", m.id, err)
	}
	proc, err := NewProcess(s.Process)
	if err != nil {
		return fmt.Errorf("container %s: %w", m.id, err)
	}
	proc.Env = env
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: m.id,
		// A scope of the pod's slice under the systemd cgroup driver.
		UseSystemdCgroup: s.Linux != nil && IsSystemdCgroupsPath(s.Linux.CgroupsPath),
		Spec:             &s,
	})
	if err != nil {
		return fmt.Errorf("convert spec of container %s: %w", m.id, err)
	}
	rot := LogRotation{MaxSize: rec.LogMaxSize, MaxFiles: rec.LogMaxFiles}
	if reloaded, ok, err := ReadRotation(filepath.Join(m.dir, RotationFile)); err != nil {
		log.Warn("log rotation set by a reload not readable; using the container's", "err", err)
	} else if ok {
		rot = reloaded
	}
	// The log's directory and its live file exist before the container does;
	// only the C writer writes the file, from the hand-over, or drainLog.
	logDir, err := makeLog(rec.LogPath)
	if err != nil {
		return err
	}
	defer logDir.Close()
	rots := &rotation{}
	rots.set(rot)
	stopHup := make(chan struct{})
	defer close(stopHup)
	go m.reloadRotation(rots, stopHup, log)
	if err := waitState(); err != nil {
		return err
	}
	pauseAt(PauseRun)

	ctr, err := libcontainer.Create(m.root, m.id, cfg)
	if err != nil {
		return fmt.Errorf("create container %s: %w", m.id, err)
	}
	exit, err := m.runContainer(ctr, proc, &st, logDir, rec.LogPath, rots)
	if exit == nil && err != nil {
		f := startFailure(err)
		exit = &f
	}
	// The exit before the clean-up: a monitor that dies in between leaves
	// libcontainer state, which the daemon removes with the container.
	if exit != nil {
		if werr := m.writeExit(*exit); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	pauseAt(PauseDestroy)
	if derr := ctr.Destroy(); derr != nil {
		err = errors.Join(err, fmt.Errorf("destroy container %s: %w", m.id, derr))
	}
	return err
}

// reloadRotation takes RotationFile into rots on each SIGHUP until stop: the
// daemon writes it and signals us when a reload changed the log settings.
// The state was written with RotationReload before the log was made, so a
// change made meanwhile is in the file read then or comes with a SIGHUP. The
// log's writer takes rots as it starts: the hand-over passes it to the C
// monitor, which reads the file once more, for a SIGHUP during the exec.
func (m *monitorProc) reloadRotation(rots *rotation, stop <-chan struct{}, log *slog.Logger) {
	for {
		select {
		case <-stop:
			return
		case <-m.hup:
		}
		rot, ok, err := ReadRotation(filepath.Join(m.dir, RotationFile))
		if err == nil && ok {
			rots.set(rot)
		}
		if err != nil {
			log.Warn("log rotation not changed", "err", err)
			continue
		}
		if ok {
			log.Info("log rotation changed", "maxSize", rot.MaxSize, "maxFiles", rot.MaxFiles)
		}
	}
}

// runContainer starts proc in ctr and reports it; on success it never
// returns: the C monitor takes over (see handOver). A nil exit means the
// container never started.
func (m *monitorProc) runContainer(ctr *libcontainer.Container, proc *libcontainer.Process, st *State, logDir *os.File, logPath string, rots *rotation) (*ExitRecord, error) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	proc.Stdin, proc.Stdout, proc.Stderr = devNull, outW, errW

	// The pod's OOM kill count before the container can be killed: a
	// container that allocates at once can be OOM-killed, and its scope
	// removed by systemd, before Run returns (see oomKilledSince). The
	// paths are known before the cgroup exists; the pod's cgroup already does.
	var oom podOOM
	if state, err := ctr.State(); err == nil {
		oom.before, oom.ok = podOOMKills(state.CgroupPaths)
	}
	// ctr.Run, in its two steps (each under the container's lock, as Run
	// takes it), so that a test can stop between them: Exec returns once
	// the init process was told to exec. What the container writes
	// meanwhile waits in the pipes (64 KiB each) for the C monitor.
	runErr := ctr.Start(proc)
	if runErr == nil {
		pauseAt(PauseExec)
		runErr = ctr.Exec()
	}
	_ = outW.Close()
	_ = errW.Close()
	if runErr != nil {
		return nil, errors.Join(fmt.Errorf("run container %s: %w", m.id, runErr), drainLog(m.id, logDir, logPath, rots.get(), outR, errR))
	}
	pid, err := proc.Pid()
	if err != nil {
		return nil, fmt.Errorf("container %s pid: %w", m.id, err)
	}
	st.Pid, st.StartedAt = pid, time.Now()
	if err := WriteJSON(filepath.Join(m.dir, StateFile), st); err != nil {
		// Without its pid in the state no daemon can adopt the container.
		_ = SignalContainer(ctr, unix.SIGKILL)
		return nil, errors.Join(err, drainLog(m.id, logDir, logPath, rots.get(), outR, errR))
	}
	m.sendReport(Report{Pid: pid, StartedAt: st.StartedAt})
	rot := rots.get()
	// The C monitor, and the exit recorder after it, work in the log
	// directory this monitor opened: the descriptor goes to them, never the
	// path again.
	dirFd, err := unix.Dup(int(logDir.Fd()))
	if err != nil {
		return nil, fmt.Errorf("pass on the log directory: %w", err)
	}
	herr := m.handOver(pid, logPath, dirFd, st.SecretEnvFd, rot, outR, errR, oom)
	_ = unix.Close(dirFd)
	// Nothing would copy its output or record its exit: the container, which
	// the daemon was told runs, is killed, and its exit recorded as such, with
	// what it wrote.
	_ = SignalContainer(ctr, unix.SIGKILL)
	_, _ = proc.Wait()
	exit := &ExitRecord{ExitCode: 128 + int(unix.SIGKILL), Signal: int(unix.SIGKILL), FinishedAt: time.Now(),
		Message: "container killed: " + herr.Error()}
	return exit, errors.Join(herr, drainLog(m.id, logDir, logPath, rot, outR, errR))
}

// podOOM is the pod cgroup's OOM kill count before the container started.
type podOOM struct {
	before uint64
	ok     bool
}

// handOver execs the C monitor (package monitor) in this process, which
// copies the container's output, reaps its init and execs runExit with the
// wait status. Only an exec that failed returns.
//
// SIGHUP (a reload's new log rotation) and SIGCHLD are blocked first, in the
// thread that execs: the mask survives the exec, the handlers do not, so a
// SIGHUP in between would kill the process, and the C monitor takes both
// from a signalfd. A SIGHUP that Go's handler took before the block is not
// lost: the C monitor reads the rotation file as it starts.
//
// secretFd, when not 0, is the container's sensitive environment
// (keepSecretEnv), kept open by the C monitor for exec in the container.
func (m *monitorProc) handOver(pid int, logPath string, dirFd, secretFd int, rot LogRotation, out, errs *os.File, oom podOOM) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.Sigset_t
	for _, sig := range []unix.Signal{unix.SIGHUP, unix.SIGCHLD} {
		set.Val[(sig-1)/64] |= 1 << ((uint(sig) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		return fmt.Errorf("block signals: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
	outFd, errFd := int(out.Fd()), int(errs.Fd())
	pass := []int{outFd, errFd, dirFd}
	if secretFd > 0 {
		pass = append(pass, secretFd)
	}
	for _, fd := range pass {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("pass on pipe %d: %w", fd, err)
		}
	}
	itoa := strconv.Itoa
	argv := []string{Name, RunningArg, m.id, logPath, itoa(dirFd),
		strconv.FormatInt(rot.MaxSize, 10), itoa(rot.MaxFiles), filepath.Join(m.dir, RotationFile),
		itoa(pid), itoa(outFd), itoa(errFd), GzipArg,
		// runExit's arguments, to which the C monitor adds its own.
		Name, ExitArg, m.root, m.dir, m.id, logPath, itoa(dirFd), itoa(outFd), itoa(errFd),
		strconv.FormatUint(oom.before, 10), strconv.FormatBool(oom.ok)}
	err := unix.Exec("/proc/self/exe", argv, os.Environ())
	runtime.KeepAlive(out)
	runtime.KeepAlive(errs)
	return fmt.Errorf("exec the running monitor: %w", err)
}

// NewProcess converts the spec's process to libcontainer's, as runc does, with
// rlimits clamped to this process's own hard limits (raising them fails).
func NewProcess(p *specs.Process) (*libcontainer.Process, error) {
	lp := &libcontainer.Process{
		Args:            p.Args,
		Env:             p.Env,
		UID:             int(p.User.UID),
		GID:             int(p.User.GID),
		Cwd:             p.Cwd,
		NoNewPrivileges: &p.NoNewPrivileges,
		Init:            true,
	}
	for _, g := range p.User.AdditionalGids {
		lp.AdditionalGroups = append(lp.AdditionalGroups, int(g))
	}
	rl, err := clampRlimits(p.Rlimits)
	if err != nil {
		return nil, err
	}
	lp.Rlimits = rl
	return lp, nil
}
