package spec

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/sys/user"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// WithUser sets the process's uid, gid and supplementary groups.
//
// The user is runAsUser when set, else the image's User ("uid", "uid:gid",
// "name", "name:group"); runAsGroup, when set, replaces the group. Names are looked
// up in the rootfs's /etc/passwd and /etc/group; a numeric uid missing from
// /etc/passwd runs with gid 0 (as containerd). Supplementary groups are the primary
// gid, the groups /etc/group lists the user in, then supplementalGroups (the
// kubelet's default "Merge" supplementalGroupsPolicy).
func WithUser(rootfs string, runAsUser, runAsGroup *int64, imageUser string, supplementalGroups []int64) SpecOpt {
	return func(s *specs.Spec) error {
		field := "image User"
		userPart, groupPart, _ := strings.Cut(imageUser, ":")
		if runAsUser != nil {
			field = "runAsUser"
			userPart, groupPart = strconv.FormatInt(*runAsUser, 10), ""
		}
		if runAsGroup != nil {
			groupPart = strconv.FormatInt(*runAsGroup, 10)
		}
		if userPart == "" {
			userPart = "0"
		}
		for _, id := range []*int64{runAsUser, runAsGroup} {
			if id != nil && (*id < 0 || *id > 1<<31-1) {
				return fmt.Errorf("runAsUser/runAsGroup %d: out of range", *id)
			}
		}

		// moby/sys/user's errors quote the name again: a longer one than
		// any user database holds is refused before it is looked up.
		for _, part := range []string{userPart, groupPart} {
			if len(part) > maxName {
				return fmt.Errorf("%s %s: longer than a user or group name can be (%d bytes)", field, show(part), maxName)
			}
		}

		passwd, err := readRootFile(rootfs, "/etc/passwd")
		if err != nil {
			return err
		}
		group, err := readRootFile(rootfs, "/etc/group")
		if err != nil {
			return err
		}

		// The user part alone: uid, its passwd gid and its /etc/group memberships.
		u, err := user.GetExecUser(userPart, nil, reader(passwd), reader(group))
		if err != nil {
			return fmt.Errorf("%s %s: %w", field, show(userPart), err)
		}
		gid := u.Gid
		if groupPart != "" {
			gid, err = lookupGroup(groupPart, group)
			if err != nil {
				field := "image User"
				if runAsGroup != nil {
					field = "runAsGroup"
				}
				return fmt.Errorf("%s %s: %w", field, show(groupPart), err)
			}
		}

		gids := []uint32{uint32(gid)}
		for _, g := range u.Sgids {
			gids = appendUnique(gids, uint32(g))
		}
		for _, g := range supplementalGroups {
			if g < 0 || g > 1<<31-1 {
				return fmt.Errorf("supplementalGroups %d: out of range", g)
			}
			gids = appendUnique(gids, uint32(g))
		}
		s.Process.User = specs.User{UID: uint32(u.Uid), GID: uint32(gid), AdditionalGids: gids}
		return nil
	}
}

func appendUnique(s []uint32, v uint32) []uint32 {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// lookupGroup resolves a group name or number against /etc/group (nil: none).
func lookupGroup(name string, group []byte) (int, error) {
	u, err := user.GetExecUser("0:"+name, nil, nil, reader(group))
	if err != nil {
		return 0, err
	}
	return u.Gid, nil
}

// maxRootFile bounds what is read of a rootfs's /etc/passwd or /etc/group.
const maxRootFile = 4 << 20

// readRootFile reads name inside rootfs, resolving symlinks within rootfs; a missing
// file is nil, not an error. It must be a regular file of at most maxRootFile
// bytes: an image's FIFO or device there is refused without being waited on
// or read without end.
func readRootFile(rootfs, name string) ([]byte, error) {
	p, err := securejoin.SecureJoin(rootfs, name)
	if err != nil {
		return nil, fmt.Errorf("resolve %s in rootfs: %w", name, err)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s in rootfs: %w", name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			err = fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
		}
		return nil, fmt.Errorf("read %s in rootfs: %w", name, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRootFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s in rootfs: %w", name, err)
	}
	if len(b) > maxRootFile {
		return nil, fmt.Errorf("read %s in rootfs: larger than %d bytes", name, maxRootFile)
	}
	return b, nil
}

// reader is nil for a missing file, which moby/sys/user takes as "no entries".
func reader(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return strings.NewReader(string(b))
}
