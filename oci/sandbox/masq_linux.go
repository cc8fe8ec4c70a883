//go:build linux && cgo

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"
)

// masqRule is the default network's one masquerade rule: traffic from the
// pod range that leaves by any interface but the bridge goes out with the
// host's address, as Docker's rule for docker0 does. It is added before
// the first pod of the range is, and deleted after the last one's DEL.
type masqRule struct {
	Bridge string `json:"bridge"`
	Subnet string `json:"subnet"`
}

// iptablesTimeout bounds one iptables command (its --wait included).
const iptablesTimeout = 30 * time.Second

// errNoIptables: the host has no iptables (or ip6tables) command.
var errNoIptables = errors.New("no iptables command")

func (m masqRule) comment() string { return "staticpodd: masquerade " + m.Bridge }

// command is iptables or ip6tables, by the range's family.
func (m masqRule) command() (string, error) {
	name := "iptables"
	if p, err := netip.ParsePrefix(m.Subnet); err == nil && p.Addr().Is6() {
		name = "ip6tables"
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, err := exec.LookPath(dir + "/" + name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w %s in PATH, /usr/sbin or /sbin (install iptables)", errNoIptables, name)
}

// run runs the rule's command with op (-C, -A or -D). exists is false,
// without an error, when -C or -D found no such rule.
func (m masqRule) run(ctx context.Context, op string) (exists bool, err error) {
	cmd, err := m.command()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
	defer cancel()
	args := []string{"--wait", "-t", "nat", op, "POSTROUTING", "-s", m.Subnet, "!", "-o", m.Bridge,
		"-m", "comment", "--comment", m.comment(), "-j", "MASQUERADE"}
	c := exec.CommandContext(ctx, cmd, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Run()
	var exit *exec.ExitError
	if err != nil && errors.As(err, &exit) && exit.ExitCode() == 1 && op != "-A" &&
		bytes.Contains(out.Bytes(), []byte("does a matching rule exist")) {
		// iptables' "Bad rule (does a matching rule exist in that chain?)",
		// legacy and nft alike. Its other failures with status 1 (a match
		// or target it cannot load) are errors, not a rule found missing:
		// else a -D that failed would count as done, and the rule leak.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s: %w: %s", cmd, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return true, nil
}

// ensure adds the rule unless it is there.
func (m masqRule) ensure(ctx context.Context) error {
	if ok, err := m.run(ctx, "-C"); err != nil || ok {
		return err
	}
	_, err := m.run(ctx, "-A")
	return err
}

// remove deletes every copy of the rule.
func (m masqRule) remove(ctx context.Context) error {
	for range 16 {
		ok, err := m.run(ctx, "-D")
		if err != nil || !ok {
			return err
		}
	}
	return fmt.Errorf("masquerade rule of %s still there after 16 deletions", m.Subnet)
}
