//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
	ociexec "github.com/staticpodd/staticpodd/oci/exec"
)

// Exec runs a process in running container id, as `runc exec` does: it joins
// the container's namespaces and cgroup as the container's user, groups,
// working directory, capabilities, no_new_privs, AppArmor profile, SELinux
// label and seccomp filter, with the container's environment and es.Env over
// it. It returns the process's exit code (128+n when killed by signal n) once
// it has exited and its output has been copied.
//
// It fails with podspec.ErrNotExist for an unknown container,
// podspec.ErrNotRunning for one without a running process,
// podspec.ErrCommandNotFound or podspec.ErrCommandNotExecutable when the
// command cannot be started, and podspec.ErrExecTimeout (or ctx's cause)
// when the process outlived es.Timeout (or ctx): it is killed then, with its
// process group (see exec.Run).
//
// The process is the child of the exec server, the daemon's child, which
// runs the monitor's program (see exec.Server). If the daemon dies first, it loses its
// standard input (EOF), output (EPIPE) or terminal (SIGHUP), and keeps running
// if it uses none of them; the next daemon kills it (see killLeftoverExecs),
// and it dies with its container anyway.
func (r *Runtime) Exec(ctx context.Context, id string, es podspec.ExecSpec) (int, error) {
	if len(es.Cmd) == 0 {
		return -1, fmt.Errorf("exec in container %s: no command", id)
	}
	code, err := r.exec(ctx, id, es)
	if err != nil {
		return code, fmt.Errorf("exec %q in container %s: %w", es.Cmd[0], id, err)
	}
	return code, nil
}

func (r *Runtime) exec(ctx context.Context, id string, es podspec.ExecSpec) (int, error) {
	// libcontainer attaches the process to the container's cgroups on Run's
	// critical path, as for a start.
	r.warmer.warm()
	return execIn(ctx, r.execer(), r.containerDir(id), r.libcontainerRoot(), id, es, r.log)
}

// execServer starts a Runtime's execs.
type execServer = ociexec.Server

// execServerIdle is how long the exec server is kept once no exec runs:
// probes a few seconds apart reuse it, and a node without exec probes runs
// none.
const execServerIdle = 30 * time.Second

// execer returns the runtime's exec server, which runs the monitor's
// program (see exec.Server).
func (r *Runtime) execer() *execServer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.execs == nil {
		idle := execServerIdle
		if r.execIdleForTest > 0 {
			idle = r.execIdleForTest
		}
		r.execs = ociexec.NewServer(ociexec.Helper{Path: r.monitorPath, Env: monitorEnv(os.Environ())}, r.libcontainerRoot(), idle)
	}
	return r.execs
}

// ExecRecorded runs es in running container id of runDir as Runtime.Exec
// does, for the command line while no daemon runs: the process is a child
// of the caller, recorded under the container's state dir like a daemon's
// exec, so that a daemon started meanwhile kills it if it outlives its
// caller (exec.KillLeftovers).
func ExecRecorded(ctx context.Context, runDir, id string, es podspec.ExecSpec, log *slog.Logger) (int, error) {
	if len(es.Cmd) == 0 {
		return -1, fmt.Errorf("exec in container %s: no command", id)
	}
	// The monitor's program, as a daemon's execs run it: most often the
	// very memfd the container's monitor runs from.
	path, f, err := openMonitorExecutable(runDir, monitorBinary)
	if err != nil {
		log.Warn("exec from this binary: the monitor's program cannot run", "err", err)
	}
	if f != nil {
		defer f.Close()
	}
	root := filepath.Join(runDir, libcontainerDir)
	// A server for this one exec: Close lets it exit after it.
	s := ociexec.NewServer(ociexec.Helper{Path: path, Env: monitorEnv(os.Environ())}, root, execServerIdle)
	defer s.Close()
	code, err := execIn(ctx, s, filepath.Join(runDir, containersDir, id), root, id, es, log)
	if err != nil {
		return code, fmt.Errorf("exec %q in container %s: %w", es.Cmd[0], id, err)
	}
	return code, nil
}

// execIn runs es in container id, whose state dir is dir and whose
// libcontainer state is under root, through s.
func execIn(ctx context.Context, s *ociexec.Server, dir, root, id string, es podspec.ExecSpec, log *slog.Logger) (int, error) {
	if es.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, es.Timeout,
			fmt.Errorf("%w after %v", podspec.ErrExecTimeout, es.Timeout))
		defer cancel()
	}
	var spec specs.Spec
	if err := readJSON(filepath.Join(dir, specFile), &spec); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return -1, err
	}
	if spec.Process == nil {
		return -1, errors.New("its spec has no process")
	}
	ctr, err := libcontainer.Load(root, id)
	if errors.Is(err, libcontainer.ErrNotExist) {
		return -1, fmt.Errorf("%w: it has no process (not started yet, or exited)", podspec.ErrNotRunning)
	}
	if err != nil {
		return -1, err
	}
	if spec.Process.Env, err = fillSecretEnv(dir, spec.Process.Env); err != nil {
		return -1, err
	}
	return ociexec.Run(ctx, s, ctr, spec.Process, es, dir, log)
}

// killLeftoverExecs kills the exec processes that an earlier daemon left
// when it died (see exec.KillLeftovers).
func (r *Runtime) killLeftoverExecs(ctx context.Context) error {
	return ociexec.KillLeftovers(ctx, filepath.Join(r.cfg.RunDir, containersDir), r.libcontainerRoot(), r.log)
}
