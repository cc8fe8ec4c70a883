package spec

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// WithMounts adds the container's volume mounts: "bind" as a recursive private bind
// (read-only when ReadOnly), "tmpfs" as a nosuid,nodev tmpfs with the mount's
// options. Like containerd, a mount replaces any earlier one on the same
// destination (a /dev mount also replaces the defaults under /dev), and mounts are
// ordered parents first.
func WithMounts(ms []podspec.Mount) SpecOpt {
	return func(s *specs.Spec) error {
		out := make([]specs.Mount, 0, len(ms))
		for i, m := range ms {
			om, err := ociMount(m)
			if err != nil {
				return fmt.Errorf("mounts[%d] (%s): %w", i, m.Destination, err)
			}
			out = append(out, om)
		}
		addMounts(s, out)
		return nil
	}
}

// WithMountPropagation sets the propagation of the container's root mount
// for its volumes' mountPropagation, as containerd's CRI plugin: rshared
// with a Bidirectional volume (its mounts must reach the host's peer
// group), else rslave with a HostToContainer one; each volume's source
// must be on a host mount that propagates (shared, or also slave for
// HostToContainer), checked with mountinfo.
func WithMountPropagation(ms []podspec.Mount, mountinfo func(source string) (shared, slave bool, mountpoint string, err error)) SpecOpt {
	return func(s *specs.Spec) error {
		for _, m := range ms {
			if m.Propagation == podspec.PropagationNone || m.Type != "bind" {
				continue
			}
			shared, slave, mp, err := mountinfo(m.Source)
			if err != nil {
				return fmt.Errorf("volume at %s: mountPropagation %s: %w", m.Destination, m.Propagation, err)
			}
			switch m.Propagation {
			case podspec.PropagationBidirectional:
				if !shared {
					return fmt.Errorf("volume at %s: mountPropagation Bidirectional: %s is mounted on %s, which is not a shared mount (mount --make-rshared %s)",
						m.Destination, m.Source, mp, mp)
				}
				s.Linux.RootfsPropagation = "rshared"
			case podspec.PropagationHostToContainer:
				if !shared && !slave {
					return fmt.Errorf("volume at %s: mountPropagation HostToContainer: %s is mounted on %s, which is neither a shared nor a slave mount (mount --make-rshared %s)",
						m.Destination, m.Source, mp, mp)
				}
				if s.Linux.RootfsPropagation != "rshared" {
					s.Linux.RootfsPropagation = "rslave"
				}
			}
		}
		return nil
	}
}

func ociMount(m podspec.Mount) (specs.Mount, error) {
	if !path.IsAbs(m.Destination) {
		return specs.Mount{}, fmt.Errorf("destination %q: must be an absolute path", m.Destination)
	}
	mode := "rw"
	if m.ReadOnly {
		mode = "ro"
	}
	dst := path.Clean(m.Destination)
	switch m.Type {
	case "bind":
		if m.SubPath != "" {
			return specs.Mount{}, fmt.Errorf("subPath %q: the runtime must bind it by file descriptor first", m.SubPath)
		}
		if !path.IsAbs(m.Source) {
			return specs.Mount{}, fmt.Errorf("source %q: a bind mount needs an absolute host path", m.Source)
		}
		if m.RecursiveReadOnly {
			if !m.ReadOnly {
				return specs.Mount{}, fmt.Errorf("recursive read-only: the mount is not read-only")
			}
			mode = "rro"
		}
		prop := "rprivate"
		switch m.Propagation {
		case podspec.PropagationNone:
		case podspec.PropagationHostToContainer:
			prop = "rslave"
		case podspec.PropagationBidirectional:
			prop = "rshared"
		default:
			return specs.Mount{}, fmt.Errorf("mountPropagation %q: unknown", m.Propagation)
		}
		opts := append([]string{"rbind", prop, mode}, m.Options...)
		return specs.Mount{Destination: dst, Type: "bind", Source: m.Source, Options: opts}, nil
	case "tmpfs":
		opts := append([]string{"nosuid", "nodev", mode}, m.Options...)
		return specs.Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs", Options: opts}, nil
	default:
		return specs.Mount{}, fmt.Errorf("type %q: must be \"bind\" or \"tmpfs\"", m.Type)
	}
}

// WithSandboxFiles bind-mounts the pod's /etc/hosts, /etc/hostname and
// /etc/resolv.conf, those of sb that are set; read-only with a read-only rootfs.
func WithSandboxFiles(sb Sandbox, readonly bool) SpecOpt {
	return func(s *specs.Spec) error {
		mode := "rw"
		if readonly {
			mode = "ro"
		}
		var ms []specs.Mount
		for _, f := range []struct{ src, dst, field string }{
			{sb.HostsFile, "/etc/hosts", "HostsFile"},
			{sb.HostnameFile, "/etc/hostname", "HostnameFile"},
			{sb.ResolvConfFile, "/etc/resolv.conf", "ResolvConfFile"},
		} {
			if f.src == "" {
				continue
			}
			if !path.IsAbs(f.src) {
				return fmt.Errorf("sandbox %s %q: must be an absolute path", f.field, f.src)
			}
			ms = append(ms, specs.Mount{
				Destination: f.dst, Type: "bind", Source: f.src,
				Options: []string{"rbind", "rprivate", mode},
			})
		}
		addMounts(s, ms)
		return nil
	}
}

// WithSandboxShm bind-mounts the pod's shared /dev/shm from path, in place of
// the container's own tmpfs; "" keeps that. It stays writable with a
// read-only rootfs, as containerd's.
func WithSandboxShm(shm string) SpecOpt {
	return func(s *specs.Spec) error {
		if shm == "" {
			return nil
		}
		if !path.IsAbs(shm) {
			return fmt.Errorf("sandbox ShmPath %q: must be an absolute path", shm)
		}
		addMounts(s, []specs.Mount{{
			Destination: "/dev/shm", Type: "bind", Source: shm,
			Options: []string{"rbind", "rprivate", "rw", "nosuid", "nodev", "noexec"},
		}})
		return nil
	}
}

// addMounts puts ms after s's mounts, dropping those they override.
func addMounts(s *specs.Spec, ms []specs.Mount) {
	if len(ms) == 0 {
		return
	}
	dsts := map[string]bool{}
	newDev := false
	for _, m := range ms {
		dsts[m.Destination] = true
		newDev = newDev || m.Destination == "/dev"
	}
	s.Mounts = slices.DeleteFunc(s.Mounts, func(m specs.Mount) bool {
		d := path.Clean(m.Destination)
		return dsts[d] || (newDev && strings.HasPrefix(d, "/dev/"))
	})
	ms = slices.Clone(ms)
	// Drop all but the last of the new mounts on one destination, then mount
	// parents before children.
	for i := len(ms) - 1; i >= 0; i-- {
		if slices.ContainsFunc(ms[i+1:], func(m specs.Mount) bool { return m.Destination == ms[i].Destination }) {
			ms = slices.Delete(ms, i, i+1)
		}
	}
	sort.SliceStable(ms, func(i, j int) bool { return depth(ms[i].Destination) < depth(ms[j].Destination) })
	s.Mounts = append(s.Mounts, ms...)
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(path.Clean(p), "/")
}
