package atomicfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The child's environment: the step it stops at and the file it writes.
const (
	childStep  = "ATOMICFILE_TEST_KILL_AT"
	childPath  = "ATOMICFILE_TEST_PATH"
	childFiles = "ATOMICFILE_TEST_FILES" // set: WriteFiles of the file and otherName beside it
)

// The files of the child's WriteFiles, in their order; with Write, only the
// first.
const (
	recordName = "record.json"
	otherName  = "other.json"
)

// Contents large enough that a part of either is not the whole of it.
var (
	oldData = bytes.Repeat([]byte("old."), 64<<10)
	newData = bytes.Repeat([]byte("new!"), 96<<10)
)

// TestMain plays the writer when the test binary is re-executed by
// TestKillAtEachStep: it writes newData and, at the step it is told,
// says so on stdout and waits to be killed.
func TestMain(m *testing.M) {
	if at := os.Getenv(childStep); at != "" {
		n, _ := strconv.Atoi(at)
		path := os.Getenv(childPath)
		SetTestHook(func(s Step, p string) {
			if s == Step(n) && p == path {
				fmt.Println(s)
				// Until SIGKILL: the parent never writes to stdin (a
				// blocked read, unlike select{}, is no deadlock to the
				// runtime).
				os.Stdin.Read(make([]byte, 1))
				os.Exit(4)
			}
		})
		write := func() error { return Write(path, newData) }
		if os.Getenv(childFiles) != "" {
			write = func() error {
				return WriteFiles(filepath.Dir(path), []File{{recordName, newData}, {otherName, newData}})
			}
		}
		if err := write(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(3) // never reached the step
	}
	os.Exit(m.Run())
}

// A writer killed (SIGKILL) at each step of Write leaves the file whole:
// the old content up to the rename, the new one from it, never a part or
// nothing; what else it leaves is a temp file that IsTemp names, which no
// reader of the file takes for it, and the next Write succeeds over it.
// The same for WriteFiles of two files, killed at each step of either:
// each file is whole, the old content up to its rename and the new from
// it, and what else is left are temp files.
func TestKillAtEachStep(t *testing.T) {
	for _, target := range []string{"", recordName, otherName} { // "": Write
		for _, first := range []bool{false, true} {
			for s := Created; s <= DirSynced; s++ {
				killAt(t, s, first, target)
			}
		}
	}
}

// killAt kills the writer at step s of the file target (WriteFiles of both
// files; "" for Write of the record), before which the files held oldData
// unless first.
func killAt(t *testing.T, s Step, first bool, target string) {
	files := target != ""
	t.Run(fmt.Sprintf("%s of %q, first write %v, WriteFiles %v", s, target, first, files), func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, recordName)
		killed := path
		if files {
			killed = filepath.Join(dir, target)
		}
		if !first {
			for _, name := range []string{recordName, otherName} {
				if err := Write(filepath.Join(dir, name), oldData); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childStep+"="+strconv.Itoa(int(s)), childPath+"="+killed)
		if files {
			cmd.Env = append(cmd.Env, childFiles+"=1")
		}
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != s.String()+"\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the writer did not stop at %s: %q, %v", s, line, err)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the writer ended by itself (%v), not by SIGKILL at %s", cmd.ProcessState, s)
		}

		// Each file: its new content once renamed, else its old, or none
		// before a first write.
		renamed := map[string]bool{}
		switch target {
		case "":
			renamed[recordName] = s >= Renamed
		case recordName: // the other is renamed after it, its directory synced last
			renamed[recordName], renamed[otherName] = s >= Renamed, s == DirSynced
		case otherName: // the record is renamed before it
			renamed[recordName], renamed[otherName] = s >= Renamed, s >= Renamed
		}
		for name, isNew := range renamed {
			got, err := os.ReadFile(filepath.Join(dir, name))
			switch {
			case isNew && !bytes.Equal(got, newData):
				t.Errorf("%s: %d bytes, %v; want the new %d", name, len(got), err, len(newData))
			case !isNew && first && !os.IsNotExist(err):
				t.Errorf("%s: %d bytes, %v; want no file", name, len(got), err)
			case !isNew && !first && !bytes.Equal(got, oldData):
				t.Errorf("%s: %d bytes, %v; want the old %d", name, len(got), err, len(oldData))
			}
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		litter := 0
		for _, e := range ents {
			switch {
			case e.Name() == recordName || e.Name() == otherName:
			case IsTemp(e.Name()):
				litter++
			default:
				t.Errorf("left %s, which is neither a file nor a temp file", e.Name())
			}
		}
		// The temp files are made one after the other, the record's
		// first, and renamed in the same order after all are synced.
		want := map[string]map[Step]int{
			"":         {Created: 1, Written: 1, Synced: 1, Renamed: 0, DirSynced: 0},
			recordName: {Created: 1, Written: 1, Synced: 2, Renamed: 1, DirSynced: 0},
			otherName:  {Created: 2, Written: 2, Synced: 2, Renamed: 0, DirSynced: 0},
		}[target][s]
		if litter != want {
			t.Errorf("%d temp files left, want %d", litter, want)
		}
		if err := Write(path, oldData); err != nil {
			t.Fatalf("the next Write: %v", err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, oldData) {
			t.Errorf("the next Write left %d bytes", len(got))
		}
	})
}

// Every Write goes through every step, both fsyncs included, in order.
func TestWriteSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.json")
	var steps []Step
	defer SetTestHook(func(s Step, p string) {
		if p == path {
			steps = append(steps, s)
		}
	})()
	if err := WriteMode(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(steps) != "[created written synced renamed dirsynced]" {
		t.Errorf("steps %v", steps)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode: %v, %v; want 0644", fi, err)
	}
}
