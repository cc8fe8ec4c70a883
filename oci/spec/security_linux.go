package spec

import (
	"errors"
	"fmt"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runc/libcontainer/apparmor"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/selinux/go-selinux"
	"github.com/opencontainers/selinux/go-selinux/label"
)

func hostAppArmorEnabled() bool { return apparmor.IsEnabled() }
func hostSELinuxEnabled() bool  { return selinux.GetEnabled() }

func seLinuxLabel(options []string) (string, error) {
	process, _, err := label.InitLabels(options)
	return process, err
}

// defaultSeccomp is Docker's and containerd's default profile, as moby
// keeps it, for the spec's capabilities and this host's architecture.
func defaultSeccomp(s *specs.Spec) (*specs.LinuxSeccomp, error) {
	return seccomp.GetDefaultProfile(s)
}

// loadSeccomp reads a profile in Docker's format or the OCI runtime spec's
// (Docker's is a superset: names, archMap, includes and excludes).
func loadSeccomp(profile []byte, s *specs.Spec) (*specs.LinuxSeccomp, error) {
	if len(profile) == 0 {
		return nil, errors.New("empty profile")
	}
	sc, err := seccomp.LoadProfile(string(profile), s)
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, fmt.Errorf("the profile has neither defaultAction nor syscalls")
	}
	return sc, nil
}
