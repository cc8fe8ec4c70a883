// Package logfiles is the one home of containers' CRI log files: their names
// (<attempt>.log, the rotated <attempt>.log.<stamp>[.gz] and the .tmp of a
// compression), the order of a log's rotated files, listing a container's runs
// and a log's files, opening them beneath the pod log directory through no
// symlink (and only regular files), and reading them (File, EntryWriter: the
// kubelet's reading of the CRI format, tails, gzipped files).
//
// The container monitor (oci/monitor) writes and rotates the files: its C
// writer (monitor.c, which names them as this package does) for the
// container's whole life, its Go writer only as the tests' oracle. agent/server serves them (/containerLogs, following a run
// across rotations and restarts); the agent picks the file of a run (LogFile)
// and says when files go, which this package removes: a pod's log directories
// (RemovePodLogs), the files of a container's old runs (PruneRuns), and the
// directories of pods no daemon claims (RemoveLeftoverPodLogs). The monitor
// links this package: it imports the standard library only
// (tests/deps_test.go).
package logfiles

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The files of a container's log, as the agent names, reads and prunes them
// and the runtime writes and rotates them. Each run of a container writes
// <LogDir>/<name>/<attempt>.log (Container.LogPath). Rotation renames that
// file to <attempt>.log.<stamp>, a local time in RotatedLogTimeFormat, and
// compresses the older rotated files to <attempt>.log.<stamp>.gz, going
// through <attempt>.log.<stamp>.tmp: the kubelet's container log manager
// names them so.
const (
	RotatedLogTimeFormat = "20060102-150405"
	CompressedLogSuffix  = ".gz"
	TempLogSuffix        = ".tmp"
)

// LogFileName is the name of the log file of a container's run attempt.
func LogFileName(attempt int) string {
	return strconv.Itoa(attempt) + ".log"
}

// LogAttempt returns the run a file of a container's log directory belongs
// to: n for "<n>.log" and for the files rotation made of it,
// "<n>.log.<suffix>". ok is false for any other name.
func LogAttempt(name string) (attempt int, ok bool) {
	num, rest, found := strings.Cut(name, ".log")
	if !found || (rest != "" && !strings.HasPrefix(rest, ".")) || rest == "." {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return 0, false
	}
	return n, true
}

// Runs returns the runs of a container that have files in its log directory
// dir (an <attempt>.log, or only files rotation made of one), oldest first,
// each once. The directory is read beneath the pod log directory through no
// symlink (ReadContainerDir).
func Runs(dir string) ([]int, error) {
	names, err := ReadContainerDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []int
	for _, name := range names {
		if n, ok := LogAttempt(name); ok {
			runs = append(runs, n)
		}
	}
	slices.Sort(runs)
	return slices.Compact(runs), nil
}

// RotatedLog is a file rotation made of a log file.
type RotatedLog struct {
	Path       string // <log>.<stamp>, or <log>.<stamp>.gz when Compressed
	Stamp      string // orders the rotated files of one log: oldest first
	Compressed bool
}

// RotatedLogs returns the rotated files of the log file path that hold its
// lines, oldest first, and the files a rotation or compression cut short
// left (temporary files, and uncompressed files whose compressed copy
// exists), as the kubelet's GetAllLogs and filterUnusedLogs tell them apart.
// The list is of one moment (readDirNames): a file compressed meanwhile is
// in it in one form or the other. A file in it may be gone when opened.
//
// The directory is opened beneath the pod log directory with no symlink
// followed (OpenContainerDir).
func RotatedLogs(path string) (inUse []RotatedLog, unused []string, err error) {
	dir, base := filepath.Split(path)
	all, err := readDirNames(filepath.Clean(dir))
	if err != nil {
		return nil, nil, fmt.Errorf("list rotated logs of %s: %w", path, err)
	}
	inUse, unused = rotatedLogs(all, dir, base)
	return inUse, unused, nil
}

// rotatedLogs sorts the names all of directory dir as RotatedLogs does;
// the paths it returns are names joined to dir.
func rotatedLogs(all []string, dir, base string) (inUse []RotatedLog, unused []string) {
	prefix := base + "."
	names := map[string]bool{}
	for _, name := range all {
		if strings.HasPrefix(name, prefix) {
			names[name] = true
		}
	}
	for name := range names {
		full := filepath.Join(dir, name)
		stamp := strings.TrimPrefix(name, prefix)
		switch {
		case strings.HasSuffix(name, TempLogSuffix), names[name+CompressedLogSuffix]:
			unused = append(unused, full)
		case strings.HasSuffix(name, CompressedLogSuffix):
			inUse = append(inUse, RotatedLog{Path: full, Stamp: strings.TrimSuffix(stamp, CompressedLogSuffix), Compressed: true})
		default:
			inUse = append(inUse, RotatedLog{Path: full, Stamp: stamp})
		}
	}
	slices.SortFunc(inUse, func(a, b RotatedLog) int { return strings.Compare(a.Stamp, b.Stamp) })
	slices.Sort(unused)
	return inUse, unused
}
