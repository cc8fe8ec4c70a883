package tests

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Budgets of the release build (make build) on linux/amd64, in bytes: what
// it measured when the budget was last set, plus about 2% for the drift of
// dependency and Go updates. A change that needs more says so here, with the
// make bench-size report that shows where the bytes went (docs/benchmarks.md).
const (
	// bin/staticpodd, the embedded monitor included: 54.38 MB on
	// 2026-12-05, a quarter of it k8s.io/api (every API group, through the
	// scheme of client-go's typed clients, which its certificate manager
	// takes) and the function tables. A template executed anywhere in the
	// binary (text/template, html/template: cobra's SetVersionTemplate or
	// SetUsageTemplate, golang.org/x/net/trace) makes the linker keep every
	// exported method of every type, 15 MB more: make bench-size names it.
	binaryBudget = 55_500_000
	// The monitor's own program (oci/monitor/exe), which every container
	// start and exec re-executes: 7.19 MB on 2026-12-05.
	monitorBudget = 7_350_000
	// The .deb (dpkg-deb -Zxz -z9) and the .rpm (nfpm's xz): 11.77 and
	// 16.64 MB on 2026-12-05.
	debBudget = 12_000_000
	rpmBudget = 17_000_000
)

// TestBinarySize fails when the binary make test built (STATICPODD_BIN)
// outgrows its budget, or when the release build stops being stripped or
// trimmed. It reads that binary rather than building one, so it costs
// nothing; a binary that is not make build's (no embedmonitor tag: a plain
// go build) is not what is packaged and is skipped.
func TestBinarySize(t *testing.T) {
	bin := os.Getenv("STATICPODD_BIN")
	if bin == "" {
		t.Skip("STATICPODD_BIN unset: make test passes the release build")
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	trimmed := false
	for _, s := range info.Settings {
		switch s.Key {
		case "-tags":
			tags = strings.Split(s.Value, ",")
		case "-trimpath":
			trimmed = s.Value == "true"
		}
	}
	if !slices.Contains(tags, "embedmonitor") {
		t.Skipf("%s is not make build's binary (tags %v)", bin, tags)
	}
	if !trimmed {
		t.Errorf("%s was built without -trimpath", bin)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{".symtab", ".debug_info"} {
		if f.Section(name) != nil {
			t.Errorf("%s has %s: the release build links with -s -w", bin, name)
		}
	}
	checkSize(t, bin, binaryBudget)
	// make build leaves the monitor it embedded where the embed reads it.
	if _, err := os.Stat("../oci/monitor/exe/staticpodd-monitor"); err == nil {
		checkSize(t, "../oci/monitor/exe/staticpodd-monitor", monitorBudget)
	}
}

// TestPackageSize holds the packages make test-packages built to their
// budget: what an appliance image or a node download carries.
func TestPackageSize(t *testing.T) {
	dir := os.Getenv("STATICPODD_PKG_DIR")
	if dir == "" {
		t.Skip("STATICPODD_PKG_DIR is not set: make test-packages builds the packages and sets it")
	}
	for pattern, budget := range map[string]int64{"staticpodd_*.deb": debBudget, "staticpodd-[0-9]*.rpm": rpmBudget} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) != 1 {
			t.Fatalf("%s in %s: %q, want one", pattern, dir, m)
		}
		checkSize(t, m[0], budget)
	}
}

func checkSize(t *testing.T, path string, budget int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes, budget %d", path, st.Size(), budget)
	if st.Size() > budget {
		t.Errorf("%s is %d bytes, over its budget of %d: see where the bytes went with make bench-size, and cut them or raise the budget in tests/size_test.go, saying why", path, st.Size(), budget)
	}
}
