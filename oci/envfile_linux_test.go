//go:build linux

package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

func TestResolveEnvFiles(t *testing.T) {
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "config.env"), []byte("CONFIG_1='value1'\nCONFIG_2='value2'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := func(path, key string, optional bool) *podspec.EnvFile {
		return &podspec.EnvFile{Dir: vol, Path: path, Key: key, Optional: optional}
	}
	env := []podspec.EnvVar{
		{Name: "PLAIN", Value: "p"},
		{Name: "ONE", File: file("config.env", "CONFIG_1", false)},
		{Name: "TWO", File: file("/./config.env", "CONFIG_2", false)},
		{Name: "GONE", File: file("config.env", "NOPE", true)},
	}
	got, err := resolveEnvFiles(env)
	if err != nil {
		t.Fatal(err)
	}
	want := []podspec.EnvVar{{Name: "PLAIN", Value: "p"}, {Name: "ONE", Value: "value1"}, {Name: "TWO", Value: "value2"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Value != want[i].Value || got[i].File != nil {
			t.Errorf("got[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if env[1].Value != "" {
		t.Error("resolveEnvFiles changed its argument")
	}

	for _, tt := range []struct {
		name string
		file *podspec.EnvFile
		err  string
	}{
		{"missing key", file("config.env", "NOPE", false), `environment variable key "NOPE" not found in file "config.env"`},
		{"missing file, optional", file("none.env", "A", true), "cannot open env file"},
	} {
		_, err := resolveEnvFiles([]podspec.EnvVar{{Name: "X", File: tt.file}})
		if !errors.Is(err, podspec.ErrContainerConfig) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err %v, want a container config error with %q", tt.name, err, tt.err)
		}
	}
}

// The env file is the container's: its path never leads out of the volume,
// and only a regular file of bounded size is read.
func TestEnvFileHostile(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.env")
	if err := os.WriteFile(secret, []byte("KEY='host secret'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := t.TempDir()
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(os.Symlink(secret, filepath.Join(vol, "abs.env")))
	rel, err := filepath.Rel(vol, secret)
	mustDo(err)
	mustDo(os.Symlink(rel, filepath.Join(vol, "rel.env")))
	mustDo(os.Symlink(outside, filepath.Join(vol, "dir")))
	mustDo(syscall.Mkfifo(filepath.Join(vol, "fifo.env"), 0o644))
	mustDo(os.Mkdir(filepath.Join(vol, "sub"), 0o755))
	big, err := os.Create(filepath.Join(vol, "big.env"))
	mustDo(err)
	mustDo(big.Truncate(maxEnvFileSize + 1))
	mustDo(big.Close())

	for _, p := range []string{"abs.env", "rel.env", "dir/secret.env", "../" + rel, "fifo.env", "sub", "big.env"} {
		t.Run(p, func(t *testing.T) {
			got, err := resolveEnvFiles([]podspec.EnvVar{{Name: "X", File: &podspec.EnvFile{Dir: vol, Path: p, Key: "KEY"}}})
			if err == nil {
				t.Fatalf("read %+v through %q, want an error", got, p)
			}
			if !errors.Is(err, podspec.ErrContainerConfig) {
				t.Errorf("err %v, want a container config error", err)
			}
			t.Log(err)
		})
	}

	// A symlink that stays inside the volume is followed, as SecureJoin does.
	mustDo(os.WriteFile(filepath.Join(vol, "sub", "real.env"), []byte("KEY='inside'\n"), 0o644))
	mustDo(os.Symlink("/sub/real.env", filepath.Join(vol, "in.env")))
	got, err := resolveEnvFiles([]podspec.EnvVar{{Name: "X", File: &podspec.EnvFile{Dir: vol, Path: "in.env", Key: "KEY"}}})
	if err != nil || got[0].Value != "inside" {
		t.Errorf("got %+v, %v, want inside", got, err)
	}
}

// A device node the container made in the volume (runc lets it mknod any) is
// refused before the daemon, host root outside the container's devices
// cgroup, opens it: opening /dev/watchdog arms it. /dev/null stands in,
// planted at the path and behind a symlink the volume resolves to it.
func TestEnvFileDeviceNodeNotOpened(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	vol := t.TempDir()
	if err := unix.Mknod(filepath.Join(vol, "null.env"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(vol, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(vol, "dev", "watchdog"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/watchdog", filepath.Join(vol, "link.env")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"null.env", "link.env"} {
		fh, err := openInVolume(vol, p)
		if err == nil {
			fh.Close()
		}
		if !errors.Is(err, logfiles.ErrNotRegular) {
			t.Errorf("openInVolume(%q) = %v, want %v before any open", p, err, logfiles.ErrNotRegular)
		}
	}
}
