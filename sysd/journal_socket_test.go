package sysd

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"golang.org/x/sys/unix"
)

// TestJournalOverSocket: what journald receives, on its socket, for a pod's
// record: MESSAGE names the pod and the container, and the fields match
// every query packaging/README.md documents. The test runs again in a mount
// namespace of its own whose /run is a tmpfs holding a journal socket of
// the test's: go-systemd writes to /run/systemd/journal/socket.
func TestJournalOverSocket(t *testing.T) {
	if os.Getenv("STATICPODD_JOURNAL_CHILD") == "1" {
		journalChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: a mount namespace with a journal socket of its own")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run", "^TestJournalOverSocket$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "STATICPODD_JOURNAL_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestJournalOverSocket") {
		t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
	}
}

func journalChild(t *testing.T) {
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	path := "/run/systemd/journal/socket"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var fallback bytes.Buffer
	log := slog.New(newJournalHandler(slog.LevelInfo, journal.Send, slog.NewTextHandler(&fallback, nil)))
	log.With("pod", "kube-system/etcd-node1").Warn("probe failed", "container", "etcd", "probe", "liveness", "output", "HTTP 503\nService Unavailable")
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("read the journal socket: %v (fallback: %s)", err, fallback.String())
	}
	vars := parseNative(t, buf[:n])
	if want := `probe failed pod="kube-system/etcd-node1" container="etcd"`; vars["MESSAGE"] != want {
		t.Errorf("MESSAGE=%q, want %q", vars["MESSAGE"], want)
	}
	for k, want := range map[string]string{"PRIORITY": "4", "POD": "kube-system/etcd-node1", "NAMESPACE": "kube-system",
		"POD_NAME": "etcd-node1", "CONTAINER": "etcd", "OUTPUT": "HTTP 503\nService Unavailable"} {
		if vars[k] != want {
			t.Errorf("%s=%q, want %q", k, vars[k], want)
		}
	}
	checkDocumentedQueries(t, vars)
}

// parseNative reads journald's native protocol: KEY=value lines, and
// KEY\n<64-bit little-endian length><value>\n for a value with a line break.
func parseNative(t *testing.T, b []byte) map[string]string {
	vars := map[string]string{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.Fatalf("truncated record at %q", b)
		}
		line := string(b[:i])
		b = b[i+1:]
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
			continue
		}
		if len(b) < 8 {
			t.Fatalf("field %s: no length", line)
		}
		n := binary.LittleEndian.Uint64(b)
		if uint64(len(b)-8) < n+1 {
			t.Fatalf("field %s: %d bytes announced, %d there", line, n, len(b)-8)
		}
		vars[line] = string(b[8 : 8+n])
		b = b[8+n+1:]
	}
	return vars
}
