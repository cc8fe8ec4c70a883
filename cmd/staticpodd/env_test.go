package main

import (
	"strings"
	"testing"
)

// CLI commands find the daemon through STATICPODD_RUN_DIR when --run-dir is
// not given; the flag wins over it.
func TestRunDirFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	t.Setenv("STATICPODD_RUN_DIR", dir)
	out, err := execute(t, newRootCmd(), "ps")
	if err != nil || !strings.Contains(out, "web-node1") {
		t.Errorf("ps with STATICPODD_RUN_DIR: %v\n%s", err, out)
	}
	out, err = execute(t, newRootCmd(), "ps", "--run-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "staticpodd is not running") || !strings.Contains(err.Error(), "STATICPODD_RUN_DIR") {
		t.Errorf("ps --run-dir elsewhere: %v\n%s", err, out)
	}
}

// config shows where the dirs came from: the environment, a flag, or the default.
func TestConfigShowsDirsFromEnvironment(t *testing.T) {
	t.Setenv("STATICPODD_ROOT_DIR", "/srv/env-root")
	out, err := execute(t, newRootCmd(), "config", "--hostname-override", "n", "--run-dir", "/run/flag")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, out)
	}
	if !hasRow(out, "rootDir", "/srv/env-root", "env", "STATICPODD_ROOT_DIR") || !hasRow(out, "runDir", "/run/flag", "flag", "--run-dir") {
		t.Errorf("config:\n%s", out)
	}
}
