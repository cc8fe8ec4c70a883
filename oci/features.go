package oci

import "fmt"

// Features are what this build of the binary can do: a plain `go build`
// (or `go install`) leaves out the seccomp and embedmonitor tags that
// `make build` sets.
type Features struct {
	// Seccomp: libcontainer was built with the seccomp tag (libseccomp
	// linked), so a container's seccomp profile can be loaded. Without it
	// runc's libcontainer refuses every container that has one.
	Seccomp bool
	// EmbeddedMonitor: the monitor program (oci/monitor/exe) is embedded
	// (the embedmonitor tag). Without it, monitors run this binary itself,
	// which works and costs a larger executable per container start.
	EmbeddedMonitor bool
}

// BuildCommand is how a binary with every feature is built: the Makefile's
// build, or by hand the go build line with the tags that matter here
// (libseccomp-dev installed, cgo on).
const BuildCommand = "make build, or CGO_ENABLED=1 go build -tags 'seccomp netgo osusergo' ./cmd/staticpodd with libseccomp-dev installed"

// SeccompMissing says why a seccomp profile cannot be honoured by this
// build, naming the build that can; "" when it can.
func (f Features) SeccompMissing() string {
	if f.Seccomp {
		return ""
	}
	return "this staticpodd was built without seccomp support (the seccomp build tag) and cannot apply a seccomp profile; build it with " + BuildCommand
}

// CheckBuild is the build's own start-up finding: nil, or an error saying
// what the binary lacks and how to build one that has it. Unlike Check's
// findings it does not stop the daemon, which runs every pod it can and
// refuses, at conversion, the containers that need what is missing.
func CheckBuild() error {
	if msg := BuildFeatures().SeccompMissing(); msg != "" {
		return fmt.Errorf("seccomp: %s", msg)
	}
	return nil
}

// Describe is one line per feature, as `staticpodd version` prints them.
func (f Features) Describe() string {
	seccomp, monitor := "yes", "yes"
	if !f.Seccomp {
		seccomp = "no: pods with a seccompProfile other than Unconfined are refused; build with " + BuildCommand
	}
	if !f.EmbeddedMonitor {
		monitor = "no: container monitors run this binary itself"
	}
	return "seccomp: " + seccomp + "\nembedded monitor: " + monitor + "\n"
}
