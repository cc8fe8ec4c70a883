//go:build !linux

package spec

import (
	"errors"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func hostAppArmorEnabled() bool { return false }
func hostSELinuxEnabled() bool  { return false }

func seLinuxLabel([]string) (string, error) { return "", errors.ErrUnsupported }

func defaultSeccomp(*specs.Spec) (*specs.LinuxSeccomp, error) { return nil, errors.ErrUnsupported }

func loadSeccomp([]byte, *specs.Spec) (*specs.LinuxSeccomp, error) {
	return nil, errors.ErrUnsupported
}

func hostPropagation(string) (bool, bool, string, error) {
	return false, false, "", errors.ErrUnsupported
}
