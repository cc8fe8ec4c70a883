package oci

import (
	"path/filepath"
	"time"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
	"github.com/staticpodd/staticpodd/oci/sandbox"
)

// On-disk layout under RunDir:
//
//	pods/<uid>/                      the pod's sandbox (package sandbox)
//	containers/<id>/container.json   containerRecord (written by the daemon)
//	containers/<id>/config.json      the OCI runtime spec, without the values of
//	                                 its sensitive env (mon.SealEnv)
//	containers/<id>/state.json       monitorState (written by the monitor)
//	containers/<id>/exit.json        exitRecord (written by the monitor at exit,
//	                                 or when its container failed to start)
//	containers/<id>/monitor.log      the monitor's own log
//	containers/<id>/log-rotation     logRotation set by a reload, read by
//	                                 the monitor at start and on SIGHUP
//	containers/<id>/log-rotation.json the same as JSON, for the monitors of
//	                                 an older staticpodd
//	containers/<id>/termination-log  bound at the container's terminationMessagePath
//	libcontainer/<id>/               libcontainer's state, removed by the monitor
const (
	podsDir         = sandbox.Dir
	containersDir   = "containers"
	libcontainerDir = "libcontainer"

	containerFile = mon.ContainerFile
	specFile      = mon.SpecFile
	stateFile     = mon.StateFile
	exitFile      = mon.ExitFile
	monitorLog    = mon.LogFile
	rotationFile  = mon.RotationFile
	// legacyRotationFile is rotationFile as JSON, which the monitors of an
	// older staticpodd read; written as long as one may still run.
	legacyRotationFile = mon.LegacyRotationFile
	// removingSuffix names a state dir being removed (see removeStateDir).
	removingSuffix = ".removing"
)

// containerRecord carries the labels the agent needs to adopt a container.
type containerRecord struct {
	ID      string `json:"id"`
	PodUID  string `json:"podUID"`
	PodName string `json:"podName"`
	PodNS   string `json:"podNamespace,omitempty"`
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
	Hash    string `json:"hash"`
	Image   string `json:"image"`
	ImageID string `json:"imageID"`
	// ImageRef is the status' imageID (podspec.ContainerStatus.ImageRef);
	// empty in records written before it was kept.
	ImageRef  string    `json:"imageRef,omitempty"`
	LogPath   string    `json:"logPath"`
	CreatedAt time.Time `json:"createdAt"`
	// TerminationGracePeriod is the pod's, to stop the container with after
	// the pod's manifest is gone.
	TerminationGracePeriod time.Duration `json:"terminationGracePeriod,omitempty"`
	// StopSignal stops the container: its own, else its image's, else
	// SIGTERM; kept so that an adopted container is stopped with it too.
	StopSignal int `json:"stopSignal,omitempty"`
	// TerminationMessage: the container's termination log is bound at its
	// terminationMessagePath, and read once it exited; FromLog: the tail of
	// its log stands in when it failed without writing one.
	TerminationMessage        bool `json:"terminationMessage,omitempty"`
	TerminationMessageFromLog bool `json:"terminationMessageFromLog,omitempty"`
	// Annotations are the agent's, given back in the container's status.
	Annotations map[string]string `json:"annotations,omitempty"`
	// MonitorPid and MonitorStart name the container's monitor, as its
	// state does once the monitor wrote it: a daemon that died after it
	// told the monitor to go leaves the next one a monitor to adopt.
	MonitorPid   int    `json:"monitorPid,omitempty"`
	MonitorStart uint64 `json:"monitorStart,omitempty"`
	// LogMaxSize and LogMaxFiles are when the monitor rotates the log
	// (logRotation) as the container starts; 0 (a record of an older
	// daemon): never. A reload changes them in rotationFile instead.
	LogMaxSize  int64 `json:"logMaxSize,omitempty"`
	LogMaxFiles int   `json:"logMaxFiles,omitempty"`
}

// What the monitor (package monitor) writes and reads, under the names the
// daemon's code has used for them.
type (
	monitorState = mon.State
	exitRecord   = mon.ExitRecord
	logRotation  = mon.LogRotation
)

// reasonStartError is the kubelet's reason for a container that could not
// be started.
const reasonStartError = mon.ReasonStartError

// The JSON files of the state dirs are written and read as the monitor does.
var (
	writeJSON            = mon.WriteJSON
	readJSON             = mon.ReadJSON
	readOptionalJSON     = mon.ReadOptionalJSON
	isSystemdCgroupsPath = mon.IsSystemdCgroupsPath
)

func (r *Runtime) containerDir(id string) string {
	return filepath.Join(r.cfg.RunDir, containersDir, id)
}

func (r *Runtime) libcontainerRoot() string {
	return filepath.Join(r.cfg.RunDir, libcontainerDir)
}

// ImagesInUse returns the image IDs of the containers recorded under runDir,
// running or exited but not yet removed, so that `images rm` can refuse to
// take an image from under a pod (its next restart would find none). It reads
// records only and works without a daemon.
func ImagesInUse(runDir string) (map[string]bool, error) {
	recs, err := filepath.Glob(filepath.Join(runDir, containersDir, "*", containerFile))
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, p := range recs {
		var rec containerRecord
		if err := readJSON(p, &rec); err != nil {
			continue // being written or removed: not a container to protect
		}
		if rec.ImageID != "" {
			used[rec.ImageID] = true
		}
	}
	return used, nil
}
