// Package testnet gives each test that runs pods a pod network of its own:
// a bridge and a /24 no other test on this machine holds at the same time,
// whatever process it runs in (test packages run in parallel), so that two
// daemons never share a bridge with two IPAM stores for one range.
package testnet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lockDir holds one lock file per range; a test holds its file's flock for
// as long as it runs.
const lockDir = "/run/staticpodd-testnet"

// Net is a test's pod network.
type Net struct {
	Bridge string
	Subnet netip.Prefix
}

// Alloc reserves a network until t ends, then deletes its bridge (which the
// bridge plugin makes and never removes).
func Alloc(t testing.TB) Net {
	t.Helper()
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := range 256 {
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprint(k)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			t.Fatal(err)
		}
		n := Net{Bridge: fmt.Sprintf("spdt%d", k), Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 97, byte(k), 0}), 24)}
		// A test run killed before its cleanup (a panic ends every test of
		// its binary) left its bridge and its pods' rules: start clean, or
		// every later holder of the range would report them as its leaks.
		_ = exec.Command("ip", "link", "del", n.Bridge).Run()
		if err := n.purgeRules(); err != nil {
			t.Fatalf("testnet: remove the rules a killed run left on %s: %v", n.Subnet, err)
		}
		t.Cleanup(func() {
			_ = exec.Command("ip", "link", "del", n.Bridge).Run()
			f.Close() // releases the lock
		})
		return n
	}
	t.Fatal("testnet: all 256 test networks are taken")
	return Net{}
}

// FreeTCPPort is a TCP port free on 127.0.0.1 a moment ago, for a hostPort.
func FreeTCPPort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// MasqueradeRule reports whether the nat table holds the one masquerade
// rule staticpodd adds for n's range while a pod is on its default network
// (package oci/sandbox): traffic from the range that leaves by any
// interface but the bridge goes out with the host's address.
// A failing iptables fails t.
func (n Net) MasqueradeRule(t testing.TB) bool {
	t.Helper()
	args := []string{"--wait", "-t", "nat", "-C", "POSTROUTING", "-s", n.Subnet.String(), "!", "-o", n.Bridge,
		"-m", "comment", "--comment", "staticpodd: masquerade " + n.Bridge, "-j", "MASQUERADE"}
	out, err := exec.Command("iptables", args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 && bytes.Contains(out, []byte("does a matching rule exist")) {
		return false
	}
	if err != nil {
		t.Fatalf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return true
}

// Leftovers lists what pods of n left on the host: with id "", any veth on
// its bridge, any iptables rule naming its range and any lease in ipamDir;
// with a pod's CNI container ID, the rules and leases naming it.
func (n Net) Leftovers(ipamDir, id string) ([]string, error) {
	var left []string
	if id == "" {
		out, err := exec.Command("ip", "-o", "link", "show", "master", n.Bridge).CombinedOutput()
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			left = append(left, "ports of "+n.Bridge+": "+string(out))
		}
	}
	rangePrefix := strings.TrimSuffix(n.Subnet.Addr().String(), "0") // "10.97.k."
	for _, table := range []string{"nat", "filter"} {
		out, err := exec.Command("iptables-save", "-t", table).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("iptables-save: %v: %s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			if (id != "" && strings.Contains(line, id)) || (id == "" && strings.Contains(line, rangePrefix)) {
				left = append(left, "iptables "+table+": "+line)
			}
		}
	}
	leases, _ := filepath.Glob(filepath.Join(ipamDir, "*", "*"))
	for _, l := range leases {
		if b := filepath.Base(l); b == "lock" || strings.HasPrefix(b, "last_reserved_ip") {
			continue
		}
		data, _ := os.ReadFile(l)
		if id == "" || strings.Contains(string(data), id) {
			left = append(left, "lease "+filepath.Base(l)+": "+string(data))
		}
	}
	return left, nil
}

// purgeRules deletes the iptables rules naming n's range, the CNI chains they
// jump to, and the rules jumping to those chains.
func (n Net) purgeRules() error {
	rangePrefix := strings.TrimSuffix(n.Subnet.Addr().String(), "0")
	for _, table := range []string{"nat", "filter"} {
		out, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			return fmt.Errorf("iptables -t %s -S: %w", table, err)
		}
		chains := map[string]bool{}
		var rules [][]string
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, rangePrefix) {
				continue
			}
			args := splitRule(line)
			for i, a := range args {
				if a == "-j" && i+1 < len(args) && strings.HasPrefix(args[i+1], "CNI-") && !strings.HasPrefix(args[i+1], "CNI-HOSTPORT-") {
					chains[args[i+1]] = true
				}
			}
			rules = append(rules, args)
		}
		for _, line := range strings.Split(string(out), "\n") {
			args := splitRule(line)
			if len(args) > 2 && args[0] == "-A" && !strings.Contains(line, rangePrefix) {
				if j := slices.Index(args, "-j"); j >= 0 && j+1 < len(args) && chains[args[j+1]] {
					rules = append(rules, args)
				}
			}
		}
		for _, r := range rules {
			r[0] = "-D"
			_ = exec.Command("iptables", append([]string{"-t", table}, r...)...).Run()
		}
		for c := range chains {
			_ = exec.Command("iptables", "-t", table, "-F", c).Run()
			_ = exec.Command("iptables", "-t", table, "-X", c).Run()
		}
	}
	return nil
}

// splitRule splits a line of iptables -S into arguments: words, or
// double-quoted strings with \" inside.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	quoted, inWord := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case c == ' ' && !quoted:
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// GetUntil fetches url from the host, retrying until the server answers (its
// port is its readiness) or 20 s pass.
func GetUntil(t testing.TB, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
