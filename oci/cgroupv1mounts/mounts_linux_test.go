package cgroupv1mounts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
)

// childEnv makes the test binary a child that makes one fs manager and
// prints its paths and the bytes it read doing so (seeded with the mounts
// in Env when there are): libcontainer reads them once per process.
const childEnv = "CGROUPV1ROOT_TEST_CHILD"

type childResult struct {
	Paths  map[string]string
	Read   int64 // rchar of /proc/self/io across the manager's making
	Seeded bool
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(longChildEnv); dir != "" {
		longChild(dir)
	}
	if os.Getenv(childEnv) != "" {
		var r childResult
		if mounts, ok := os.LookupEnv(Env); ok {
			r.Seeded = Seed(mounts)
		}
		before := rchar()
		mgr, err := fs.NewManager(&cgroups.Cgroup{Path: "/staticpodd-test", Resources: &cgroups.Resources{SkipDevices: true}}, nil)
		r.Read = rchar() - before
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r.Paths = mgr.GetPaths()
		_ = json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rchar is what this process has read so far, less the read of the file
// that says so.
func rchar() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		panic(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n - int64(len(b))
		}
	}
	panic("no rchar in /proc/self/io")
}

func child(t *testing.T, env ...string) childResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v: %s", err, errOut.String())
	}
	var r childResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("child's answer %q: %v", out.String(), err)
	}
	return r
}

// TestSeededMonitorMakesTheSameManagerWithoutMountinfo: a process given the
// mounts the daemon read makes the cgroup v1 manager libcontainer would have
// made, with the same paths, without reading the mount table.
func TestSeededMonitorMakesTheSameManagerWithoutMountinfo(t *testing.T) {
	mounts := Encoded()
	if cgroups.IsCgroup2UnifiedMode() {
		if mounts != "" {
			t.Fatalf("Encoded on a cgroup v2 host = %q, want none", mounts)
		}
		t.Skip("cgroup v2 host: libcontainer's v1 manager is not used")
	}
	if mounts == "" {
		t.Fatal("Encoded found no cgroup mounts on a cgroup v1 host")
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	alone := child(t)
	if alone.Read < int64(len(mountinfo))/2 {
		// Then the seed saves nothing here, and its being ignored would
		// pass unseen.
		t.Skipf("unseeded, libcontainer read %d bytes, not the %d-byte mount table: it finds every hierarchy at its default path on this host", alone.Read, len(mountinfo))
	}
	seeded := child(t, Env+"="+mounts)
	if !seeded.Seeded {
		t.Fatalf("the child refused the mounts %s", mounts)
	}
	if fmt.Sprint(seeded.Paths) != fmt.Sprint(alone.Paths) || len(alone.Paths) == 0 {
		t.Errorf("seeded, the manager's paths are\n%v\nwithout the seed\n%v", seeded.Paths, alone.Paths)
	}
	if seeded.Read >= int64(len(mountinfo))/2 {
		t.Errorf("seeded, making the manager read %d bytes; the mount table is %d", seeded.Read, len(mountinfo))
	}
	t.Logf("making the manager read %d bytes seeded, %d alone; the mount table is %d bytes", seeded.Read, alone.Read, len(mountinfo))
}

func TestSeedRefusesWhatIsNotCgroupMounts(t *testing.T) {
	good := `{"Mountpoint":"/sys/fs/cgroup/memory","FSType":"cgroup","VFSOptions":"rw,memory"}`
	many := "[" + strings.Repeat(good+",", maxMounts) + good + "]"
	for _, enc := range []string{"", "null", "[]", "[null]", "{}", "not json", many,
		`[{"Mountpoint":"/sys/fs/cgroup/memory","FSType":"cgroup2"}]`,
		`[{"Mountpoint":"sys/fs/cgroup/memory","FSType":"cgroup"}]`,
		`[{"Mountpoint":"/sys/fs/cgroup/../memory","FSType":"cgroup"}]`,
		"[" + good + `,{"Mountpoint":"/x/","FSType":"cgroup"}]`,
	} {
		if Seed(enc) {
			t.Errorf("Seed(%.80q) took it", enc)
		}
	}
}
