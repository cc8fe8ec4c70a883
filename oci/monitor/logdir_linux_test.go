package monitor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// logTree is a pod log directory, <root>/<pod>/<ctr>/0.log, and a canary
// directory outside it holding files named as the log's oldest rotated
// files would be: what a container that mounts the pod log directory could
// point its own log directory at.
type logTree struct {
	root, pod, ctr, log string
	canary              string
	before              string // snapshot of the canary and of root's parent
}

func newLogTree(t *testing.T) *logTree {
	t.Helper()
	base := t.TempDir()
	lt := &logTree{root: filepath.Join(base, "pods"), canary: filepath.Join(base, "canary")}
	lt.pod = filepath.Join(lt.root, "default_p_uid")
	lt.ctr = filepath.Join(lt.pod, "main")
	lt.log = filepath.Join(lt.ctr, "0.log")
	for _, d := range []string{lt.ctr, lt.canary, filepath.Join(lt.canary, "main")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"0.log", "0.log.20200101-000000", "0.log.20200101-000001", "main/0.log", "main/0.log.20200101-000000"} {
		if err := os.WriteFile(filepath.Join(lt.canary, f), []byte("a host file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lt.before = lt.snapshot(t)
	return lt
}

// snapshot lists the canary's files with their sizes, and the names in the
// pod log directory's parent.
func (lt *logTree) snapshot(t *testing.T) string {
	t.Helper()
	var out []string
	_ = filepath.Walk(lt.canary, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, fmt.Sprintf("%s %d", strings.TrimPrefix(p, lt.canary), fi.Size()))
		}
		return nil
	})
	ents, _ := os.ReadDir(filepath.Dir(lt.root))
	for _, e := range ents {
		out = append(out, "parent: "+e.Name())
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func (lt *logTree) check(t *testing.T) {
	t.Helper()
	if after := lt.snapshot(t); after != lt.before {
		t.Errorf("outside the pod log directory, before:\n%s\nafter:\n%s", lt.before, after)
	}
}

// A container log directory, or its pod's, replaced by a symlink before
// the monitor starts (a container that mounts the pod log directory did
// it, and exited): the Go writer refuses to open the log, and creates,
// renames and removes nothing where the symlink points.
func TestCRILogRefusesSymlinkedLogDir(t *testing.T) {
	for _, which := range []string{"container", "pod"} {
		t.Run(which, func(t *testing.T) {
			lt := newLogTree(t)
			swapped, target := lt.ctr, lt.canary
			if which == "pod" {
				swapped = lt.pod
			}
			if err := os.Rename(swapped, swapped+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, swapped); err != nil {
				t.Fatal(err)
			}
			l, err := openCRILog(lt.log, LogRotation{MaxSize: 100, MaxFiles: 2}, slogDiscard())
			if err == nil {
				r, w, _ := os.Pipe()
				go func() {
					for range 50 {
						fmt.Fprintln(w, "a line of the container's output")
					}
					w.Close()
				}()
				_ = l.copy("stdout", r)
				l.Close()
				t.Error("the Go writer opened a log beneath a symlinked directory")
			} else {
				t.Logf("refused: %v", err)
			}
			lt.check(t)
		})
	}
}

// The C monitor keeps the log directory it was given open and works in it
// by name: the container's directory swapped for a symlink to a host
// directory and back, again and again while the log rotates at every few
// lines, never moves a create, a rename, a compression or a removal there.
func TestRunningMonitorLogDirSwappedWhileRotating(t *testing.T) {
	lt := newLogTree(t)
	m := startRunningMonitorLog(t, `i=0; while [ $i -lt 20000 ]; do echo "line $i of the container's output"; i=$((i+1)); done; read x < "$GO"`, lt.log, 512, 3)
	m.running()
	// Swapped until the container's last line is in the log: its output
	// makes a rotation every few lines meanwhile.
	swaps := 0
	for ; swaps < 30000; swaps++ {
		if err := os.Rename(lt.ctr, lt.ctr+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(lt.canary, lt.ctr); err != nil {
			t.Fatal(err)
		}
		live, _ := os.ReadFile(filepath.Join(lt.ctr+".real", "0.log"))
		if err := os.Remove(lt.ctr); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(lt.ctr+".real", lt.ctr); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(live), "line 19999 ") {
			break
		}
	}
	m.release()
	m.exit()
	t.Logf("%d swaps; monitor log:\n%s", swaps, m.monitorLog())
	lt.check(t)
	live, err := os.ReadFile(lt.log)
	if err != nil || !strings.Contains(string(live), "line 19999 ") {
		t.Errorf("the live log does not end with the container's last line: %v", err)
	}
}
