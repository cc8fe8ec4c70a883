package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// run executes the whole command tree with args, stdout and stderr apart.
func run(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errOut, err := run(args...)
		if err != nil || out != versionText() || errOut != "" {
			t.Errorf("%v: stdout %q stderr %q err %v, want %q", args, out, errOut, err, versionText())
		}
	}
	if _, _, err := run("-v"); err == nil {
		t.Error("-v is accepted: it is the kubelet's verbosity, not --version")
	}
}

// TestUnknownSubcommand: every command that only groups subcommands prints its
// help for no subcommand (exit 0) and fails on an unknown one, usage on stderr.
func TestUnknownSubcommand(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() {
			groups = append(groups, path)
		}
		for _, s := range c.Commands() {
			walk(s, append(append([]string(nil), path...), s.Name()))
		}
	}
	walk(newRootCmd(), nil)
	if len(groups) < 2 {
		t.Fatalf("found groups %v, want the root and images at least", groups)
	}
	for _, g := range groups {
		name := strings.TrimSpace("staticpodd " + strings.Join(g, " "))
		out, errOut, err := run(append(g, "frobnicate")...)
		if err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate" for "`+name+`"`) {
			t.Errorf("%s frobnicate: err %v, want unknown command", name, err)
		}
		if out != "" || !strings.Contains(errOut, "Available Commands:") {
			t.Errorf("%s frobnicate: stdout %q, stderr %q: want usage on stderr only", name, out, errOut)
		}
		out, _, err = run(g...)
		if err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("%s: err %v, stdout %q: want help, no error", name, err, out)
		}
	}
	if _, _, err := run("images", "prun"); err == nil || !strings.Contains(err.Error(), "did you mean") {
		t.Errorf("images prun: err %v, want a suggestion", err)
	}
}
