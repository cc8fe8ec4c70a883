package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// The files of a container's state dir that the monitor reads or writes
// (the daemon's package oci keeps the rest of the layout):
//
//	container.json     the daemon's record; the monitor reads its log fields
//	config.json        the OCI runtime spec
//	state.json         State, written by the monitor
//	exit.json          ExitRecord, written by the monitor at exit, or when
//	                   its container failed to start
//	monitor.log        the monitor's own log
//	log-rotation.json  LogRotation set by a reload, read by the monitor at
//	                   start and on SIGHUP
const (
	ContainerFile = "container.json"
	SpecFile      = "config.json"
	StateFile     = "state.json"
	ExitFile      = "exit.json"
	LogFile       = "monitor.log"
	RotationFile  = "log-rotation.json"
)

// containerLog is what the monitor reads of the daemon's container record
// (oci's containerRecord, same JSON names).
type containerLog struct {
	LogPath     string `json:"logPath"`
	LogMaxSize  int64  `json:"logMaxSize,omitempty"`
	LogMaxFiles int    `json:"logMaxFiles,omitempty"`
}

// Report is what a monitor tells the daemon once, over the report pipe.
type Report struct {
	Pid       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	Error     string    `json:"error,omitempty"`
}

// MaxLogLine is the longest log line written whole; longer lines are split
// into partial ("P") entries, as the kubelet's CRI log format allows.
const MaxLogLine = 16 * 1024

// LogRotation is when a container's log file is rotated: the kubelet's
// containerLogMaxSize and containerLogMaxFiles.
type LogRotation struct {
	// MaxSize is the size the live file never grows past (unless one entry
	// is larger): it is rotated before. 0 or less: never rotated.
	MaxSize int64 `json:"maxSize"`
	// MaxFiles is how many files the log keeps, the live one included; at
	// least 2.
	MaxFiles int `json:"maxFiles"`
}

// State is written by the monitor: first with its own identity, then
// with the container's init process once it was told to exec.
type State struct {
	MonitorPid   int    `json:"monitorPid"`
	MonitorStart uint64 `json:"monitorStart"` // /proc/<pid>/stat starttime
	// RotationReload: the monitor reads RotationFile again on SIGHUP. A
	// monitor of an older daemon, without it, dies of SIGHUP: it is never
	// sent one.
	RotationReload bool      `json:"rotationReload,omitempty"`
	Pid            int       `json:"pid,omitempty"`
	StartedAt      time.Time `json:"startedAt,omitzero"`
}

// ExitRecord is the container's exit, or its failure to start, as its
// monitor (or the daemon, when the monitor died) recorded it.
type ExitRecord struct {
	ExitCode   int       `json:"exitCode"`
	Signal     int       `json:"signal,omitempty"`
	OOMKilled  bool      `json:"oomKilled,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
	Message    string    `json:"message,omitempty"`
	// Reason overrides the one derived from the exit code.
	Reason string `json:"reason,omitempty"`
}

// ReasonStartError is the kubelet's reason for a container that could not
// be started.
const ReasonStartError = "StartError"

// WriteJSON writes v to path atomically: a reader sees the old file or the new
// one, never a part.
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadJSON reads path into v; a missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// ReadOptionalJSON is ReadJSON that reports a missing file as ok == false.
func ReadOptionalJSON(path string, v any) (ok bool, err error) {
	err = ReadJSON(path, v)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// IsSystemdCgroupsPath tells a systemd cgroups path (a pod's slice, or a
// container's slice:prefix:name) from a cgroupfs one (absolute).
func IsSystemdCgroupsPath(p string) bool {
	slice, _, _ := strings.Cut(p, ":")
	return !strings.HasPrefix(p, "/") && strings.HasSuffix(slice, ".slice")
}
