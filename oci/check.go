package oci

// CheckConfig is what the start-up checks look at.
type CheckConfig struct {
	// CgroupRoot is the parent of every pod cgroup; it must be writable.
	CgroupRoot string
	// CgroupDriver is "cgroupfs" or "systemd"; it must fit the host.
	CgroupDriver string
	// FailSwapOn: swap that is on is a failure (the kubelet's failSwapOn).
	FailSwapOn bool
}

// A check is one start-up check: a name and what it found wrong (nil: fine).
// Checks are listed in checks (check_linux.go); a new one is a function there.
type check struct {
	name string
	run  func(CheckConfig) error
}
