package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// loopFS is an ext4 filesystem in a sparse file, loop-mounted, that the
// daemon's root dir lives on, so that the soak can fill it to 100%.
type loopFS struct {
	image, mnt string
	fill       string // the file that fills it, while it does
}

// newLoopFS makes and mounts a filesystem of sizeMiB. Its cleanup is
// registered now, so it runs after the cleanups registered later (the
// daemon's): it frees the space, unmounts (lazily if something still holds
// it, which the daemon's leak check has reported by then) and removes the
// image, even when the test failed.
func newLoopFS(t *testing.T, sizeMiB int) *loopFS {
	t.Helper()
	mnt, err := os.MkdirTemp("", "staticpodd-chaos-fs-")
	if err != nil {
		t.Fatal(err)
	}
	fs := &loopFS{image: mnt + ".img", mnt: mnt}
	t.Cleanup(func() {
		fs.free()
		if err := syscall.Unmount(fs.mnt, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("unmount the chaos filesystem %s: %v; detached lazily", fs.mnt, err)
			syscall.Unmount(fs.mnt, syscall.MNT_DETACH)
		}
		os.Remove(fs.mnt)
		os.Remove(fs.image)
	})
	f, err := os.Create(fs.image)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(int64(sizeMiB) << 20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// -m 0: root, which the daemon is, gets no reserve beyond "full".
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", fs.image).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", fs.image, fs.mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v\n%s", fs.image, err, out)
	}
	return fs
}

// fillUp writes a file until the filesystem has no block left.
func (fs *loopFS) fillUp() error {
	fs.fill = filepath.Join(fs.mnt, "chaos-fill")
	f, err := os.Create(fs.fill)
	if err != nil {
		return fmt.Errorf("fill %s: %w", fs.mnt, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			return fmt.Errorf("fill %s: %w", fs.mnt, err)
		}
	}
	// The last blocks: smaller writes until not even one byte fits.
	for n := 1 << 19; n > 0; n /= 2 {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return nil
}

// free removes the file that fills the filesystem.
func (fs *loopFS) free() {
	if fs.fill != "" {
		os.Remove(fs.fill)
		fs.fill = ""
	}
}

// full reports whether no block is free.
func (fs *loopFS) full() bool {
	var st syscall.Statfs_t
	return syscall.Statfs(fs.mnt, &st) == nil && st.Bavail == 0
}

// monitorOf returns the pid of the monitor of container id, as its
// state.json names it, once /proc confirms it is that monitor.
func monitorOf(runDir, id string) (int, error) {
	b, err := os.ReadFile(filepath.Join(runDir, "containers", id, "state.json"))
	if err != nil {
		return 0, err
	}
	var st struct {
		MonitorPid int `json:"monitorPid"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("state.json of %s: %w", id, err)
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.MonitorPid))
	if err != nil {
		return 0, err
	}
	args := strings.Split(string(cmd), "\x00")
	if len(args) < 5 || args[0] != "staticpodd-monitor" || args[4] != id {
		return 0, fmt.Errorf("pid %d is not the monitor of %s: %q", st.MonitorPid, id, args)
	}
	return st.MonitorPid, nil
}

// procStat returns the daemon's resident set in KiB and its open fds.
func procStat(pid int) (rssKiB, fds int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fmt.Sscan(v, &rssKiB)
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	return rssKiB, len(ents), nil
}

// veths lists the host's veth interfaces by name.
func veths() (map[string]bool, error) {
	out, err := exec.Command("ip", "-o", "link", "show", "type", "veth").Output()
	if err != nil {
		return nil, fmt.Errorf("ip link show type veth: %w", err)
	}
	names := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		// "7: name@peer: <...": the name, without its peer.
		if f := strings.Fields(line); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			names[name] = true
		}
	}
	return names, nil
}

// fdList lists what a process's fds point at, one a line.
func fdList(pid int) string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if l == "anon_inode:[pidfd]" {
			// The process it is of, and what that runs if it still does.
			info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
			for _, line := range strings.Split(string(info), "\n") {
				if v, ok := strings.CutPrefix(line, "Pid:"); ok {
					v = strings.TrimSpace(v)
					cmd, _ := os.ReadFile("/proc/" + v + "/cmdline")
					l += fmt.Sprintf(" of pid %s %q", v, strings.ReplaceAll(string(cmd), "\x00", " "))
				}
			}
		}
		fmt.Fprintf(&b, "  %s -> %s\n", e.Name(), l)
	}
	return b.String()
}

// execServerHandles counts the live exec servers of the daemon whose run dir
// is runDir that pid holds a pidfd on: the one handle the daemon keeps on
// each until it retires. A second handle on one server is a leak: it is
// not counted.
func execServerHandles(pid int, runDir string) int {
	servers := map[string]bool{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); l != "anon_inode:[pidfd]" {
			continue
		}
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "Pid:"); ok {
				cmd, _ := os.ReadFile("/proc/" + strings.TrimSpace(v) + "/cmdline")
				args := strings.Split(string(cmd), "\x00")
				if len(args) > 2 && args[0] == "staticpodd-monitor" && args[1] == "__staticpodd_exec" && strings.HasPrefix(args[2], runDir+"/") {
					servers[strings.TrimSpace(v)] = true
				}
			}
		}
	}
	return len(servers)
}

// holder is a process holding a file or a listening unix socket.
type holder struct {
	path      string // what it holds
	pid, ppid int
	cmdline   string // NUL-separated, as /proc has it
}

// holders lists the processes holding one of paths open: a file, or a
// listening unix socket bound at it.
func holders(paths []string) []holder {
	targets := map[string]string{} // fd link → path
	for _, p := range paths {
		targets[p] = p
	}
	if b, err := os.ReadFile("/proc/net/unix"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 8 && targets[f[7]] != "" {
				targets["socket:["+f[6]+"]"] = f[7]
			}
		}
	}
	var out []holder
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if targets[l] == "" {
				continue
			}
			h := holder{path: targets[l], pid: pid}
			cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
			h.cmdline = string(cmd)
			st, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "status"))
			for _, line := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(line, "PPid:"); ok {
					h.ppid, _ = strconv.Atoi(strings.TrimSpace(v))
				}
			}
			out = append(out, h)
		}
	}
	return out
}
