package hostile

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A container with podLogsDir mounted writable and CAP_MKNOD (runc lets
// every container mknod any device; the devices cgroup stops only its own
// open) plants a block device node, a loop device standing for the host's
// disk, as the .tmp of each rotated file of its log, again and again while
// its log rotates. The monitor's gzip helper must not write the compressed
// file into the device: the device's backing file stays zero, and the
// rotated files are still compressed, into regular files.
func TestHostileLogDeviceNodePlanted(t *testing.T) {
	t.Parallel()
	backing := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(backing, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", backing).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}

	d := logDirDaemon(t, "1Ki", 5)
	// Batches of lines, each rotating the log, with a node planted as the
	// .tmp of every rotated file before and after each, until a rotated
	// file is compressed into a regular file (the pause lets the helper
	// finish before rotation removes its file).
	plant := fmt.Sprintf(`for f in $c/0.log.2*; do case $f in *.gz|*.tmp) ;; *) [ -e "$f.tmp" ] || mknod "$f.tmp" b %d %d 2>/dev/null && n=$((n+1)) ;; esac; done; `,
		unix.Major(st.Rdev), unix.Minor(st.Rdev))
	script := `n=0; i=0; while [ $i -lt 600 ]; do ` + plant +
		`j=0; while [ $j -lt 20 ]; do echo "line $i.$j of the output, long enough to rotate the log often"; j=$((j+1)); done; ` + plant +
		`z=0; for g in $c/*.gz; do [ -f "$g" ] && z=1; done; [ $z = 1 ] && break; sleep 0.05; i=$((i+1)); done; echo "planted $n nodes in $i batches, compressed: $z"`
	d.WriteManifest("dev.yaml", logDirPod("dev", d.LogsDir, "Never", script, ""))
	waitState(t, d, "dev", 120*time.Second, "exited", terminated)
	logs, _ := d.CLIErr("logs", "dev")
	t.Logf("%s", logs[strings.LastIndex(logs[:max(len(logs)-1, 0)], "\n")+1:])

	disk, err := os.ReadFile(backing)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(disk, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Errorf("the host's device was written at offset %d: % x", i, disk[i:min(i+16, len(disk))])
	}
	dirs, _ := filepath.Glob(filepath.Join(d.LogsDir, "default_dev-*", "main"))
	if len(dirs) != 1 {
		t.Fatalf("log directories %q, want one", dirs)
	}
	ents, err := os.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeDevice != 0 && !strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("%s is a device node: the monitor took one for its file", e.Name())
		}
	}
	// The container saw a rotated file compressed into a regular file.
	if !strings.Contains(logs, "compressed: 1") {
		t.Errorf("no rotated file was compressed: the case did not run\n%s", tree(t, dirs[0]))
	}
}
