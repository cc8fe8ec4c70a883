package spec

import (
	"errors"
	"fmt"
	"path"
	"strings"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// processArgs applies Kubernetes command/args over the image's Entrypoint/Cmd
// (containerd's getProcessArgs): a command replaces both; args alone replace Cmd;
// neither runs Entrypoint+Cmd. An Entrypoint of [""] counts as none.
func processArgs(c *podspec.Container, img imagespec.ImageConfig) ([]string, error) {
	command, args := c.Command, c.Args
	if len(command) == 0 {
		if len(args) == 0 {
			args = img.Cmd
		}
		if !(len(img.Entrypoint) == 1 && img.Entrypoint[0] == "") {
			command = img.Entrypoint
		}
	}
	out := append(append([]string(nil), command...), args...)
	if len(out) == 0 {
		return nil, errors.New("command: none given and the image has no Entrypoint or Cmd")
	}
	return out, nil
}

// WithProcessArgs sets the process's argv.
func WithProcessArgs(args ...string) SpecOpt {
	return func(s *specs.Spec) error {
		if len(args) == 0 || args[0] == "" {
			return errors.New("command: empty")
		}
		if len(args[0]) >= maxPath {
			return fmt.Errorf("command %s: longer than a path can be (%d bytes)", show(args[0]), maxPath-1)
		}
		for i, a := range args {
			if len(a) > maxArg {
				return fmt.Errorf("command argument %d %s: longer than the kernel takes (%d bytes)", i, show(a), maxArg)
			}
		}
		s.Process.Args = append([]string(nil), args...)
		return nil
	}
}

func envStrings(env []podspec.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

func envKey(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return k
}

// WithEnv sets "KEY=value" entries: a key already present is replaced where it is,
// a new key is appended, so image env then pod env keeps the image's order with the
// pod's values (containerd's WithEnv). The keys are indexed, not searched for: an
// image's config may hold hundreds of thousands of entries.
func WithEnv(env []string) SpecOpt {
	return func(s *specs.Spec) error {
		at := make(map[string]int, len(s.Process.Env)+len(env))
		for i, e := range s.Process.Env {
			if _, ok := at[envKey(e)]; !ok {
				at[envKey(e)] = i
			}
		}
		// An error names the variable, never shows its value: a value may
		// be a Secret's (podspec.EnvVar.Sensitive).
		for i, kv := range env {
			k := envKey(kv)
			if k == "" {
				return fmt.Errorf("env[%d]: empty name", i)
			}
			if len(kv) > maxArg {
				return fmt.Errorf("env[%d] %s: longer than the kernel takes (%d bytes)", i, show(k), maxArg)
			}
			if j, ok := at[k]; ok {
				s.Process.Env[j] = kv
				continue
			}
			at[k] = len(s.Process.Env)
			s.Process.Env = append(s.Process.Env, kv)
		}
		return nil
	}
}

// WithDefaultEnv appends "KEY=value" entries whose key is not set yet.
func WithDefaultEnv(env ...string) SpecOpt {
	return func(s *specs.Spec) error {
	next:
		for _, kv := range env {
			k := envKey(kv)
			for _, e := range s.Process.Env {
				if envKey(e) == k {
					continue next
				}
			}
			s.Process.Env = append(s.Process.Env, kv)
		}
		return nil
	}
}

// WithCwd sets the working directory: the container's workingDir, else the image's
// WorkingDir, else "/".
func WithCwd(containerDir, imageDir string) SpecOpt {
	return func(s *specs.Spec) error {
		field, dir := "workingDir", containerDir
		if dir == "" {
			field, dir = "image WorkingDir", imageDir
		}
		if dir == "" {
			dir = "/"
		}
		if !path.IsAbs(dir) {
			return fmt.Errorf("%s %s: must be an absolute path", field, show(dir))
		}
		if len(dir) >= maxPath {
			return fmt.Errorf("%s %s: longer than a path can be (%d bytes)", field, show(dir), maxPath-1)
		}
		s.Process.Cwd = path.Clean(dir)
		return nil
	}
}

// WithNoNewPrivileges sets no_new_privs (allowPrivilegeEscalation: false).
func WithNoNewPrivileges(on bool) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.NoNewPrivileges = on
		return nil
	}
}

// WithNofileLimit sets RLIMIT_NOFILE soft and hard to want, lowered to the calling
// process's own hard limit: a container may not be given more than its runtime
// has, or it fails to start with "setrlimit: operation not permitted".
func WithNofileLimit(want uint64) SpecOpt {
	return func(s *specs.Spec) error {
		var own unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil {
			return fmt.Errorf("read own RLIMIT_NOFILE: %w", err)
		}
		n := min(want, own.Max)
		rl := specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Soft: n, Hard: n}
		for i := range s.Process.Rlimits {
			if s.Process.Rlimits[i].Type == rl.Type {
				s.Process.Rlimits[i] = rl
				return nil
			}
		}
		s.Process.Rlimits = append(s.Process.Rlimits, rl)
		return nil
	}
}
