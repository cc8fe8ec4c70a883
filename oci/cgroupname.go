package oci

import (
	"fmt"
	"path"
	"strings"
	"syscall"
	"time"
)

// systemdScopePrefix names a container's scope under the systemd cgroup
// driver: staticpodd-<container id>.scope, as containerd's CRI names its
// cri-containerd-<id>.scope.
const systemdScopePrefix = "staticpodd"

// podCgroupsPath is where pod uid's cgroup goes. Under cgroupfs: the path
// <cgroupRoot>/pod<uid>. Under systemd: a slice named as the kubelet's
// CgroupName.ToSystemd names a pod's ({cgroupRoot..., "kubepods",
// "pod"+uid}, dashes escaped to underscores), e.g. cgroupRoot /staticpodd
// gives staticpodd-kubepods-pod<uid>.slice inside staticpodd-kubepods.slice
// inside staticpodd.slice. There are no QoS-class levels: every pod sits
// where the kubelet puts a Guaranteed one.
func podCgroupsPath(driver, cgroupRoot, uid string) string {
	if driver != CgroupDriverSystemd {
		return path.Join(cgroupRoot, "pod"+uid)
	}
	return strings.Join(sliceParts(cgroupRoot, "kubepods", "pod"+uid), "-") + ".slice"
}

// sliceParts is the kubelet's CgroupName of cgroupRoot and then parts, each
// part escaped as the kubelet's escapeSystemdCgroupName does. A root given
// in systemd's form (/a.slice/a-b.slice) is named by its last slice.
func sliceParts(cgroupRoot string, parts ...string) []string {
	root := strings.Trim(cgroupRoot, "/")
	var rootParts []string
	if strings.HasSuffix(root, ".slice") {
		rootParts = strings.Split(strings.TrimSuffix(path.Base(root), ".slice"), "-")
	} else if root != "" {
		rootParts = strings.Split(root, "/")
	}
	var out []string
	for _, p := range rootParts {
		if p != "" {
			out = append(out, p)
		}
	}
	for _, p := range parts {
		out = append(out, strings.ReplaceAll(p, "-", "_"))
	}
	return out
}

// containerCgroupsPath is where container id's cgroup goes inside its pod's:
// a directory under cgroupfs, a scope (slice:prefix:name, the OCI runtime
// spec's form for systemd) under systemd.
func containerCgroupsPath(podPath, id string) string {
	if isSystemdCgroupsPath(podPath) {
		return podPath + ":" + systemdScopePrefix + ":" + id
	}
	return podPath + "/" + id
}

// minScopeStopTimeout is the least a container scope waits after its
// SIGTERM: the kubelet's minimum grace period (minimumGracePeriodInSeconds),
// and never 0, which systemd takes for no timeout at all.
const minScopeStopTimeout = 2 * time.Second

// scopeStopProperties are the unit properties of a container's scope under
// the systemd cgroup driver, as libcontainer passes spec annotations of the
// form org.systemd.property.NAME on to systemd: when systemd stops the scope
// (at shutdown, or `systemctl stop` of the scope), it sends the container's
// stop signal and waits the pod's grace period before SIGKILL, instead of
// SIGTERM and the scope default of 90 s that holds up a poweroff.
func scopeStopProperties(grace time.Duration, stop syscall.Signal) map[string]string {
	return map[string]string{
		"org.systemd.property.TimeoutStopUSec": fmt.Sprintf("uint64 %d", max(grace, minScopeStopTimeout).Microseconds()),
		"org.systemd.property.KillSignal":      fmt.Sprintf("int32 %d", int32(stop)),
	}
}

// scopeOrderProperties orders a container's scope against the scopes of
// the containers it must stop before (stopBefore) and after (stopAfter),
// for when systemd, not the daemon, stops them: at power-off, systemd
// stops units in the reverse of their start order, so After= on a
// dependency's scope stops this one first. The scope of a container made
// later carries the order both ways (a dependency restarted after its
// dependents gets Before= on theirs), so whichever of two containers
// started last orders them. systemd takes After= and Before= on a
// transient unit and accepts names of units that do not exist (one gone
// since) without complaint. IDs that are not container IDs are dropped.
func scopeOrderProperties(stopBefore, stopAfter []string) map[string]string {
	props := map[string]string{}
	for prop, ids := range map[string][]string{"After": stopBefore, "Before": stopAfter} {
		var units []string
		for _, id := range ids {
			if isContainerID(id) {
				units = append(units, fmt.Sprintf("%q", systemdScopePrefix+"-"+id+".scope"))
			}
		}
		if len(units) > 0 {
			props["org.systemd.property."+prop] = "[" + strings.Join(units, ", ") + "]"
		}
	}
	return props
}

// isContainerID reports whether id is of the form newID makes: hex digits
// only, so that it names a unit as it is.
func isContainerID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
