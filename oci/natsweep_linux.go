//go:build linux && cgo

package oci

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// sweepNAT removes the nat rules CNI plugins left of the attachment id once
// its DEL has run: rules whose comment names the ID, as the bridge and
// portmap plugins comment theirs, and the chains of its own they jump to.
// Debian's bridge plugin removes its masquerade rules only for the addresses
// it finds on the pod's interface, which a DEL that failed half-way
// (iptables-nft saying a chain that is there does not exist) has already
// deleted: the DEL that then succeeds leaves the rules for ever. A machine
// without iptables has nothing to sweep.
func sweepNAT(id string) error {
	marker := `id: "` + id + `"`
	var errs []string
	for _, cmd := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(cmd, "-w", "-t", "nat", "-S").Output()
		if err != nil {
			continue
		}
		// The chains of the attachment's own are those its rules jump to
		// (CNI-<hash of the network and ID>); shared ones (CNI-HOSTPORT-*)
		// only lose the attachment's rules.
		var marked [][]string
		own := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			args := splitRule(line)
			if len(args) < 2 || args[0] != "-A" || !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, marker) }) {
				continue
			}
			marked = append(marked, args)
			if j := slices.Index(args, "-j"); j >= 0 && j+1 < len(args) &&
				strings.HasPrefix(args[j+1], "CNI-") && !strings.HasPrefix(args[j+1], "CNI-HOSTPORT-") {
				own[args[j+1]] = true
			}
		}
		// The jumps into its own chains first, then the rules in them, then
		// the chains (flushed first: not every rule of theirs may carry the
		// comment).
		var ops [][]string
		for pass := range 2 {
			for _, args := range marked {
				if own[args[1]] == (pass == 1) {
					ops = append(ops, append([]string{"-D"}, args[1:]...))
				}
			}
		}
		for c := range own {
			ops = append(ops, []string{"-F", c}, []string{"-X", c})
		}
		for _, op := range ops {
			if out, err := exec.Command(cmd, append([]string{"-w", "-t", "nat"}, op...)...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v: %s", cmd, strings.Join(op, " "), err, bytes.TrimSpace(out)))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweep the nat rules of %s: %s", id, strings.Join(errs, "; "))
	}
	return nil
}

// splitRule splits a line of iptables -S into its arguments: words, or
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
