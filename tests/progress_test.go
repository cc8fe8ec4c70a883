package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// lockedBuffer is an output the test reads while the command writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An import whose archive comes slowly says how far it got, every few
// seconds, when its output is not a terminal (a log, a CI job): it does not
// look hung.
func TestImportProgressOffTerminal(t *testing.T) {
	t.Parallel()
	archive, err := os.ReadFile(testdaemon.Image)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testdaemon.Bin, "images", "import", "-", "--root-dir", filepath.Join(t.TempDir(), "root"))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr, stdout lockedBuffer
	cmd.Stderr, cmd.Stdout = &stderr, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	half := len(archive) / 2
	if _, err := in.Write(archive[:half]); err != nil {
		t.Fatal(err)
	}
	// The first line comes one period (5 s) after the start; half the
	// archive is read by then, and the rest waits for it.
	line := regexp.MustCompile(`import - \(reading\): [0-9.]+ MiB, [0-9.]+ MiB/s\n`)
	deadline := time.Now().Add(30 * time.Second)
	for !line.MatchString(stderr.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line on stderr after 30 s of a half-read archive; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("progress: %s", strings.TrimSpace(line.FindString(stderr.String())))
	if _, err := in.Write(archive[half:]); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "imported ") {
		t.Errorf("stdout %q, want the imported image", stdout.String())
	}
	if strings.Contains(stderr.String(), "\r") || strings.Contains(stderr.String(), "\x1b[") {
		t.Errorf("terminal codes written off a terminal:\n%q", stderr.String())
	}
}

// On a terminal, an import and an export draw a bar: what, the layers, the
// bytes; the command's result comes on a line of its own after it.
func TestImportExportProgressBarOnTerminal(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	term := openPty(t, 120, 24)
	// run runs the command on the terminal and returns what the terminal
	// showed, once it showed a line that holds until.
	run := func(until string, args ...string) string {
		t.Helper()
		cmd := exec.Command(testdaemon.Bin, append(args, "--root-dir", root)...)
		cmd.Stdout, cmd.Stderr = term.slave, term.slave
		term.mu.Lock()
		from := len(term.out)
		term.mu.Unlock()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		// The command has exited: wait for the terminal to have shown its
		// last line.
		deadline := time.After(10 * time.Second)
		for {
			term.mu.Lock()
			got := string(term.out[from:])
			term.mu.Unlock()
			if i := strings.LastIndex(got, until); i >= 0 && strings.Contains(got[i:], "\r\n") {
				return got
			}
			select {
			case <-term.more:
			case <-deadline:
				t.Fatalf("%s: the terminal showed %q", strings.Join(args, " "), got)
			}
		}
	}
	got := run("imported ", "images", "import", testdaemon.Image)
	if !strings.Contains(got, "import "+testdaemon.Image+" (unpacking) 1/1 layers") || !strings.Contains(got, "MiB") {
		t.Errorf("import on a terminal showed no bar with its layers and bytes:\n%q", got)
	}
	if !regexp.MustCompile(`\r\nimported [0-9a-f]{12} `).MatchString(got) && !strings.HasPrefix(got, "imported ") {
		t.Errorf("the import's result is not on a line of its own:\n%q", got)
	}
	out := filepath.Join(t.TempDir(), "out.tar")
	got = run("100%", "images", "export", "-o", out, "busybox:latest")
	if !strings.Contains(got, "export "+out+" 1/1 layers") || !strings.Contains(got, "100%") {
		t.Errorf("export on a terminal showed no bar reaching 100%%:\n%q", got)
	}
}
