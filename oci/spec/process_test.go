package spec

import (
	"reflect"
	"strings"
	"testing"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestProcessArgs(t *testing.T) {
	img := imagespec.ImageConfig{Entrypoint: []string{"/ep"}, Cmd: []string{"cmd1", "cmd2"}}
	tests := []struct {
		name          string
		command, args []string
		img           imagespec.ImageConfig
		want          []string
		wantErr       string
	}{
		{name: "neither: entrypoint+cmd", img: img, want: []string{"/ep", "cmd1", "cmd2"}},
		{name: "args only: entrypoint+args", args: []string{"a"}, img: img, want: []string{"/ep", "a"}},
		{name: "command only: command, no cmd", command: []string{"/bin/sh"}, img: img, want: []string{"/bin/sh"}},
		{name: "command+args", command: []string{"/bin/sh"}, args: []string{"-c", "x"}, img: img, want: []string{"/bin/sh", "-c", "x"}},
		{name: "empty command counts as none", command: []string{}, img: img, want: []string{"/ep", "cmd1", "cmd2"}},
		{name: "cmd only image", img: imagespec.ImageConfig{Cmd: []string{"sh"}}, want: []string{"sh"}},
		{name: "args over cmd-only image", args: []string{"ls"}, img: imagespec.ImageConfig{Cmd: []string{"sh"}}, want: []string{"ls"}},
		{name: "entrypoint [\"\"] is none", img: imagespec.ImageConfig{Entrypoint: []string{""}, Cmd: []string{"sh"}}, want: []string{"sh"}},
		{name: "nothing at all", img: imagespec.ImageConfig{}, wantErr: "command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := processArgs(&podspec.Container{Command: tt.command, Args: tt.args}, tt.img)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("args = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWithProcessArgs(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"/bin/true"}},
		{args: nil, wantErr: "command"},
		{args: []string{""}, wantErr: "command"},
	}
	for _, tt := range tests {
		s := Default()
		err := WithProcessArgs(tt.args...)(s)
		checkErr(t, err, tt.wantErr)
		if tt.wantErr == "" && !reflect.DeepEqual(s.Process.Args, tt.args) {
			t.Errorf("args = %q, want %q", s.Process.Args, tt.args)
		}
	}
}

func TestWithEnv(t *testing.T) {
	tests := []struct {
		name    string
		start   []string
		env     []string
		want    []string
		wantErr string
	}{
		{name: "append", start: []string{"A=1"}, env: []string{"B=2"}, want: []string{"A=1", "B=2"}},
		{name: "override in place", start: []string{"A=1", "B=2", "C=3"}, env: []string{"B=x", "D=4"}, want: []string{"A=1", "B=x", "C=3", "D=4"}},
		{name: "empty value", start: []string{"A=1"}, env: []string{"A="}, want: []string{"A="}},
		{name: "value with =", env: []string{"A=b=c"}, want: []string{"A=b=c"}},
		{name: "last of duplicates wins", env: []string{"A=1", "A=2"}, want: []string{"A=2"}},
		{name: "no name", env: []string{"=x"}, wantErr: "env[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			s.Process.Env = tt.start
			err := WithEnv(tt.env)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(s.Process.Env, tt.want) {
				t.Errorf("env = %q, want %q", s.Process.Env, tt.want)
			}
		})
	}
}

func TestWithDefaultEnv(t *testing.T) {
	tests := []struct {
		start, defaults, want []string
	}{
		{start: nil, defaults: []string{"PATH=/bin"}, want: []string{"PATH=/bin"}},
		{start: []string{"PATH=/x"}, defaults: []string{"PATH=/bin", "HOSTNAME=h"}, want: []string{"PATH=/x", "HOSTNAME=h"}},
		{start: []string{"HOSTNAME=mine"}, defaults: []string{"HOSTNAME=h"}, want: []string{"HOSTNAME=mine"}},
	}
	for _, tt := range tests {
		s := Default()
		s.Process.Env = tt.start
		if err := WithDefaultEnv(tt.defaults...)(s); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Process.Env, tt.want) {
			t.Errorf("env = %q, want %q", s.Process.Env, tt.want)
		}
	}
}

func TestWithCwd(t *testing.T) {
	tests := []struct {
		container, image string
		want             string
		wantErr          string
	}{
		{container: "/work", image: "/img", want: "/work"},
		{image: "/img/", want: "/img"},
		{want: "/"},
		{container: "rel", wantErr: "workingDir"},
		{image: "rel", wantErr: "image WorkingDir"},
	}
	for _, tt := range tests {
		s := Default()
		err := WithCwd(tt.container, tt.image)(s)
		checkErr(t, err, tt.wantErr)
		if tt.wantErr == "" && s.Process.Cwd != tt.want {
			t.Errorf("WithCwd(%q, %q): cwd = %q, want %q", tt.container, tt.image, s.Process.Cwd, tt.want)
		}
	}
}

func TestWithNoNewPrivileges(t *testing.T) {
	for _, on := range []bool{true, false} {
		s := Default()
		s.Process.NoNewPrivileges = !on
		if err := WithNoNewPrivileges(on)(s); err != nil {
			t.Fatal(err)
		}
		if s.Process.NoNewPrivileges != on {
			t.Errorf("WithNoNewPrivileges(%v): got %v", on, s.Process.NoNewPrivileges)
		}
	}
}

func ownNofileHard(t *testing.T) uint64 {
	t.Helper()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	return rl.Max
}

func TestWithNofileLimit(t *testing.T) {
	hard := ownNofileHard(t)
	tests := []struct {
		name  string
		start []specs.POSIXRlimit
		want  uint64
		limit uint64
	}{
		{name: "above own hard limit is clamped", want: hard + 1, limit: hard},
		{name: "far above", want: 1 << 40, limit: hard},
		{name: "below is kept", want: min(hard, 1024), limit: min(hard, 1024)},
		{name: "replaces existing", start: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1, Hard: 1}}, want: 1 << 40, limit: hard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			s.Process.Rlimits = tt.start
			if err := WithNofileLimit(tt.want)(s); err != nil {
				t.Fatal(err)
			}
			want := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: tt.limit, Hard: tt.limit}}
			if !reflect.DeepEqual(s.Process.Rlimits, want) {
				t.Errorf("rlimits = %+v, want %+v", s.Process.Rlimits, want)
			}
		})
	}
}

// checkErr fails t unless err matches want: nil for "", else containing want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
