package sysd

import (
	"fmt"
	"net"
	"os"

	"github.com/coreos/go-systemd/v22/activation"
)

// Listeners returns the listening sockets systemd passed to this process (socket
// activation), in the order of the socket unit, or nil when none were passed. A passed
// descriptor that is not a listening socket is a nil entry. The LISTEN_* variables are
// unset so that child processes do not see them.
func Listeners() ([]net.Listener, error) {
	ls, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("take socket-activated listeners: %w", err)
	}
	if len(ls) == 0 {
		return nil, nil
	}
	return ls, nil
}

// NamedListeners returns the listening sockets systemd passed, by their
// FileDescriptorName= (a socket unit's name when it sets none), or nil when none
// were passed. The LISTEN_* variables are unset so that child processes do not see
// them.
func NamedListeners() (map[string][]net.Listener, error) {
	ls, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("take socket-activated listeners: %w", err)
	}
	if len(ls) == 0 {
		return nil, nil
	}
	return ls, nil
}

// Booted reports whether systemd is the init system (sd_booted(3)).
func Booted() bool { return booted("/run/systemd/system") }

func booted(dir string) bool {
	fi, err := os.Lstat(dir)
	return err == nil && fi.IsDir()
}
