package sysd

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const childEnv = "STATICPODD_SYSD_TEST_CHILD"

// TestMain lets the test binary play a socket-activated service: systemd sets LISTEN_PID
// to the pid it execs, which only the child itself knows.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "named" {
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		ls, err := NamedListeners()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for _, name := range []string{"cli", "read-only"} {
			for _, l := range ls[name] {
				fmt.Println(name, l.Addr().String())
			}
		}
		os.Exit(0)
	}
	if os.Getenv(childEnv) == "listeners" {
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		ls, err := Listeners()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for _, l := range ls {
			if l == nil {
				fmt.Println("nil")
				continue
			}
			fmt.Println(l.Addr().String())
		}
		fmt.Printf("LISTEN_FDS=%q\n", os.Getenv("LISTEN_FDS"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestListenersActivated(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "staticpodd.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lf, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	plain, err := os.Create(filepath.Join(dir, "not-a-socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=listeners", "LISTEN_FDS=2")
	cmd.ExtraFiles = []*os.File{lf, plain} // fds 3 and 4, as systemd passes them
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := sock + "\nnil\nLISTEN_FDS=\"\"\n"
	if string(out) != want {
		t.Errorf("child saw:\n%s\nwant:\n%s", out, want)
	}
}

func TestListenersNotActivated(t *testing.T) {
	for _, tc := range []struct{ name, fds, pid string }{
		{"no LISTEN_FDS", "", ""},
		{"for another process", "1", strconv.Itoa(os.Getpid() + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LISTEN_FDS", tc.fds)
			t.Setenv("LISTEN_PID", tc.pid)
			ls, err := Listeners()
			if ls != nil || err != nil {
				t.Errorf("Listeners() = %v, %v; want nil, nil", ls, err)
			}
		})
	}
}

func TestBooted(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{dir, true},
		{filepath.Join(dir, "missing"), false},
		{file, false},
	} {
		if got := booted(tc.path); got != tc.want {
			t.Errorf("booted(%s) = %v, want %v", strings.TrimPrefix(tc.path, dir), got, tc.want)
		}
	}
}

// The daemon finds each passed socket by its FileDescriptorName.
func TestNamedListeners(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "staticpodd.sock")
	u, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	uf, err := u.File()
	if err != nil {
		t.Fatal(err)
	}
	defer uf.Close()
	tf, err := tcp.File()
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=named", "LISTEN_FDS=2", "LISTEN_FDNAMES=read-only:cli")
	cmd.ExtraFiles = []*os.File{tf, uf}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "cli " + sock + "\nread-only " + tcp.Addr().String() + "\n"
	if string(out) != want {
		t.Errorf("child saw:\n%s\nwant:\n%s", out, want)
	}
}
