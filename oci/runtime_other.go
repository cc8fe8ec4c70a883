//go:build !linux || !cgo

package oci

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// New fails: containers need Linux and cgo.
func New(cfg Config) (*Runtime, error) { return nil, errors.ErrUnsupported }

func (r *Runtime) Recover(context.Context) error                     { return errors.ErrUnsupported }
func (r *Runtime) Start(context.Context)                             {}
func (r *Runtime) Close() error                                      { return nil }
func (r *Runtime) CreateSandbox(context.Context, *podspec.Pod) error { return errors.ErrUnsupported }
func (r *Runtime) RemoveSandbox(context.Context, string) error       { return errors.ErrUnsupported }
func (r *Runtime) ListSandboxes(context.Context) ([]string, error)   { return nil, errors.ErrUnsupported }
func (r *Runtime) SandboxStatus(context.Context, string) (podspec.SandboxStatus, error) {
	return podspec.SandboxStatus{}, errors.ErrUnsupported
}
func (r *Runtime) StartContainer(context.Context, *podspec.Pod, *podspec.Container) (podspec.ContainerStatus, error) {
	return podspec.ContainerStatus{}, errors.ErrUnsupported
}
func (r *Runtime) Signal(context.Context, string, syscall.Signal) error { return errors.ErrUnsupported }
func (r *Runtime) Wait(context.Context, string) (podspec.ContainerStatus, error) {
	return podspec.ContainerStatus{}, errors.ErrUnsupported
}
func (r *Runtime) AfterExit(_ context.Context, _ string, f func()) { go f() }
func (r *Runtime) Destroy(context.Context, string) error           { return errors.ErrUnsupported }
func (r *Runtime) Exec(context.Context, string, podspec.ExecSpec) (int, error) {
	return -1, errors.ErrUnsupported
}
func (r *Runtime) Debug(context.Context, *podspec.Pod, *podspec.Container, string, podspec.ExecSpec, func(string)) (int, error) {
	return -1, errors.ErrUnsupported
}
func (r *Runtime) List(context.Context) ([]podspec.ContainerStatus, error) {
	return nil, errors.ErrUnsupported
}
func (r *Runtime) Dial(context.Context, string, string, string) (net.Conn, error) {
	return nil, errors.ErrUnsupported
}

// The Runtime's fields name these; they have no use here.
type (
	monitor        struct{}
	pendingMonitor struct{}
	attachWarmer   struct{}
	ahead          struct{}
)

func (r *Runtime) Stats(context.Context) (*podspec.Summary, error) { return nil, errors.ErrUnsupported }

func (r *Runtime) NodeStats(context.Context) (podspec.NodeStats, error) {
	return podspec.NodeStats{}, errors.ErrUnsupported
}

// MemoryNotifier needs Linux's memory cgroups.
type MemoryNotifier struct{}

// NewMemoryNotifier is unsupported here: memory pressure is polled only.
func (r *Runtime) NewMemoryNotifier() (*MemoryNotifier, error) { return nil, errors.ErrUnsupported }

func (n *MemoryNotifier) Events() <-chan struct{}         { return nil }
func (n *MemoryNotifier) SetThreshold(bytes uint64) error { return errors.ErrUnsupported }
func (n *MemoryNotifier) Close() error                    { return nil }

func (r *Runtime) SetLogRotation(int64, int) error { return errors.ErrUnsupported }

// Recorded fails: containers need Linux and cgo.
func Recorded(string) ([]podspec.ContainerStatus, error) { return nil, errors.ErrUnsupported }

// ExecRecorded fails: containers need Linux and cgo.
func ExecRecorded(context.Context, string, string, podspec.ExecSpec, *slog.Logger) (int, error) {
	return -1, errors.ErrUnsupported
}

// RecordedSandboxes fails: containers need Linux and cgo.
func RecordedSandboxes(context.Context, string) (map[string]podspec.SandboxStatus, error) {
	return nil, errors.ErrUnsupported
}

// execServer starts a Runtime's execs where there are some.
type execServer struct{}
