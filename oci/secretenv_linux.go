//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// fillSecretEnv gives env, a running container's environment as its spec
// holds it, the values of its sensitive variables (mon.SealEnv), which only
// the container's monitor holds, in memory: runc exec gives an exec'd
// process the container's whole environment, and so does Exec.
//
// Not the init's /proc/<pid>/environ: a process may rewrite that memory (a
// process title, as nginx and PostgreSQL set theirs) or exec another
// program with another environment. Not the agent's values either: they
// may have changed since the container started (an edited Secret), and a
// daemon that adopted the container, or the command line without one,
// has none.
func fillSecretEnv(dir string, env []string) ([]string, error) {
	if !hasBareEnv(env) {
		return env, nil
	}
	secret, err := readSecretEnv(dir)
	if err != nil {
		return nil, fmt.Errorf("its environment from Secrets: %w", err)
	}
	return mon.FillEnv(env, secret)
}

func hasBareEnv(env []string) bool {
	for _, kv := range env {
		if !strings.Contains(kv, "=") {
			return true
		}
	}
	return false
}

// readSecretEnv reads the memfd in which the monitor of the container whose
// state dir is dir keeps its sensitive environment, through
// /proc/<monitor>/fd: only while that monitor still runs (its pid and start
// time), and only a sealed memfd of this user's, no larger than a secret
// env can be.
func readSecretEnv(dir string) ([]string, error) {
	var st monitorState
	if err := readJSON(filepath.Join(dir, stateFile), &st); err != nil {
		return nil, err
	}
	if st.SecretEnvFd <= 0 || st.MonitorPid <= 0 {
		return nil, errors.New("its monitor keeps none")
	}
	pidfd, err := openPidfd(st.MonitorPid)
	if err != nil {
		return nil, fmt.Errorf("its monitor is gone: %w", err)
	}
	defer pidfd.Close()
	same := func() bool {
		stat, err := system.Stat(st.MonitorPid)
		return err == nil && stat.StartTime == st.MonitorStart && !pidfdExited(pidfd)
	}
	if !same() {
		return nil, errors.New("its monitor is gone")
	}
	f, err := os.Open("/proc/" + strconv.Itoa(st.MonitorPid) + "/fd/" + strconv.Itoa(st.SecretEnvFd))
	if err != nil {
		return nil, fmt.Errorf("its monitor's memfd: %w", err)
	}
	defer f.Close()
	var fst unix.Stat_t
	if !same() || unix.Fstat(int(f.Fd()), &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG ||
		fst.Size > mon.MaxSecretEnv || int(fst.Uid) != os.Geteuid() {
		return nil, errors.New("its monitor's memfd is not one")
	}
	if seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals&mon.SecretEnvSeals != mon.SecretEnvSeals {
		return nil, errors.New("its monitor's memfd is not sealed")
	}
	b, err := io.ReadAll(io.LimitReader(f, mon.MaxSecretEnv+1))
	if err != nil {
		return nil, err
	}
	return mon.DecodeSecretEnv(b)
}
