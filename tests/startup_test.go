package tests

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/asaskevich/govalidator"
)

// Budgets of what the release build's package initializers allocate before
// main, in every process of the binary: the CLI (staticpodd exec, each
// command a script runs), the daemon, the re-execs. When the total passes
// the collector's first trigger (under its 4 MB goal) a collection starts
// during the initializers, and the start costs half as much again: 2.23 MB
// on 2026-12-06 took `staticpodd version` 7.4 ms of CPU and 1177 page
// faults, where 3.24 MB (govalidator's regular expressions) took 12.0 ms and
// 2000 (perf stat -r 40, docs/benchmarks.md, "exec latency").
const (
	initAllocBudget = 2_500_000
	// No one package's initializer may build more than this eagerly (the
	// largest on 2026-12-06: the CRI API's protobuf registration, 205 KB).
	initAllocPackageBudget = 256 << 10
)

// TestStartAllocations holds what the binary make test built (STATICPODD_BIN)
// allocates in its package initializers to its budgets
// (GODEBUG=inittrace=1 staticpodd version).
func TestStartAllocations(t *testing.T) {
	bin := os.Getenv("STATICPODD_BIN")
	if bin == "" {
		t.Skip("STATICPODD_BIN unset: make test passes the release build")
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, stderr.Bytes())
	}
	var total, inits int
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init <package> @<t> ms, <clock> ms clock, <bytes> bytes, <n> allocs
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		inits++
		total += n
		if n > initAllocPackageBudget {
			t.Errorf("the initializer of %s allocates %d bytes, over %d: build what it builds at first use "+
				"(sync.OnceValue), or do without the package", f[1], n, initAllocPackageBudget)
		}
	}
	if inits < 100 {
		t.Fatalf("%d initializers traced: not the binary's (GODEBUG=inittrace=1 unsupported?)\n%s", inits, stderr.Bytes())
	}
	t.Logf("%d initializers allocate %d bytes", inits, total)
	if total > initAllocBudget {
		t.Errorf("the package initializers allocate %d bytes, over the budget of %d: see which with "+
			"GODEBUG=inittrace=1 %s version", total, initAllocBudget, bin)
	}
}

// TestGovalidatorIsEmail checks the copy of govalidator's IsEmail that
// go.mod puts in the original's place (third_party/govalidator) against the
// original's own test cases.
func TestGovalidatorIsEmail(t *testing.T) {
	for _, tc := range []struct {
		param    string
		expected bool
	}{
		{"", false},
		{"foo@bar.com", true},
		{"x@x.x", true},
		{"foo@bar.com.au", true},
		{"foo+bar@bar.com", true},
		{"foo@bar.coffee", true},
		{"foo@bar.coffee..coffee", false},
		{"foo@bar.bar.coffee", true},
		{"foo@bar.中文网", true},
		{"invalidemail@", false},
		{"invalid.com", false},
		{"@invalid.com", false},
		{"test|123@m端ller.com", true},
		{"hans@m端ller.com", true},
		{"hans.m端ller@test.com", true},
		{"NathAn.daVIeS@DomaIn.cOM", true},
		{"NATHAN.DAVIES@DOMAIN.CO.UK", true},
	} {
		if got := govalidator.IsEmail(tc.param); got != tc.expected {
			t.Errorf("IsEmail(%q) = %v, want %v", tc.param, got, tc.expected)
		}
	}
}

// TestRemoteInstallRefusalDocumented: the go command refuses `go install
// MODULE/cmd/staticpodd@VERSION` for a module whose go.mod has a replace
// directive ("must not contain directives that would cause it to be
// interpreted differently than if it were the main module"), so while go.mod
// has one, the build section of docs/configuration.md must say to build from
// a clone.
func TestRemoteInstallRefusalDocumented(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var replaces []string
	for line := range strings.Lines(string(mod)) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "replace" {
			replaces = append(replaces, strings.TrimSpace(line))
		}
	}
	if len(replaces) == 0 {
		return
	}
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n### What a plain `go build` lacks\n")
	section, _, _ = strings.Cut(section, "\n#")
	if !strings.Contains(section, "go install github.com/staticpodd/staticpodd/cmd/staticpodd@") {
		t.Errorf("go.mod has %q, which makes the go command refuse a remote go install; "+
			"docs/configuration.md (What a plain `go build` lacks) does not say so", replaces)
	}
}
