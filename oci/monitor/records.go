package monitor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// The files of a container's state dir that the monitor reads or writes
// (the daemon's package oci keeps the rest of the layout):
//
//	container.json     the daemon's record; the monitor reads its log fields
//	config.json        the OCI runtime spec, without the values of its
//	                   sensitive environment (see SealEnv)
//	state.json         State, written by the monitor
//	exit.json          ExitRecord, written by the monitor at exit, or when
//	                   its container failed to start
//	monitor.log        the monitor's own log
//	log-rotation       LogRotation set by a reload, in its fixed form
//	                   (EncodeRotation), read by the monitor at start and on
//	                   SIGHUP
//	log-rotation.json  the same as JSON, for the monitors of an older
//	                   staticpodd, which read that (LegacyRotationFile)
const (
	ContainerFile      = "container.json"
	SpecFile           = "config.json"
	StateFile          = "state.json"
	ExitFile           = "exit.json"
	LogFile            = "monitor.log"
	RotationFile       = "log-rotation"
	LegacyRotationFile = "log-rotation.json"
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

// RotationSize is the size of a rotation file: MaxSize, then MaxFiles, each
// a little-endian int64 (monitor.c's ROTATION_SIZE). A fixed form, so that
// the C monitor reads it with one read(2) and no parser.
const RotationSize = 16

// maxRotationFiles bounds MaxFiles in a rotation file either way: a larger
// one is not a file a daemon wrote (monitor.c's read_rotation refuses it too).
const maxRotationFiles = 1 << 20

// EncodeRotation is rot in the fixed form of a rotation file.
func EncodeRotation(rot LogRotation) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, RotationSize), uint64(rot.MaxSize))
	return binary.LittleEndian.AppendUint64(b, uint64(int64(rot.MaxFiles)))
}

// DecodeRotation reads a rotation file's content as monitor.c does: exactly
// RotationSize bytes, with a MaxFiles within ±maxRotationFiles.
func DecodeRotation(b []byte) (LogRotation, error) {
	if len(b) != RotationSize {
		return LogRotation{}, fmt.Errorf("log rotation of %d bytes, want %d", len(b), RotationSize)
	}
	size, files := int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
	if files > maxRotationFiles || files < -maxRotationFiles {
		return LogRotation{}, fmt.Errorf("log rotation with maxFiles %d", files)
	}
	return LogRotation{MaxSize: size, MaxFiles: int(files)}, nil
}

// WriteRotation writes rot to path in the fixed form, atomically.
func WriteRotation(path string, rot LogRotation) error {
	if err := atomicfile.Write(path, EncodeRotation(rot)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadRotation reads the rotation file path; a missing one is ok == false.
func ReadRotation(path string) (rot LogRotation, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return LogRotation{}, false, nil
	} else if err != nil {
		return LogRotation{}, false, err
	}
	if rot, err = DecodeRotation(b); err != nil {
		return LogRotation{}, false, fmt.Errorf("decode %s: %w", path, err)
	}
	return rot, true, nil
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
	// SecretEnvFd is the monitor's descriptor of the sealed memfd that
	// holds its container's sensitive environment (see SealEnv); 0: it
	// has none.
	SecretEnvFd int `json:"secretEnvFd,omitempty"`
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

// MaxMessage bounds the error that a monitor records and reports for a
// container that could not start: libcontainer's, which quotes what the
// spec holds. The daemon keeps as much of a pod's termination messages
// (podspec.MaxPodTerminationMessages).
const MaxMessage = 12 << 10

// cutMessage is s cut to at most MaxMessage bytes, on a UTF-8 boundary (as
// podspec.Truncate, which the monitor does not link).
func cutMessage(s string) string {
	n := MaxMessage
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
