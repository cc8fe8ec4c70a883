//go:build linux && cgo

package monitor

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readMem reads mapping m of this process.
func readMem(t *testing.T, m exeMapping) []byte {
	t.Helper()
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, m.end-m.start)
	if _, err := f.ReadAt(b, int64(m.start)); err != nil {
		t.Fatalf("read %#x-%#x: %v", m.start, m.end, err)
	}
	return b
}

// exeMapping is one of the test binary's read-only mappings, as smaps has it.
type exeMapping struct {
	start, end uintptr
	rss, anon  int64 // kB
	pmdMapped  int64 // kB mapped 2 MiB at a time (FilePmdMapped)
	noHuge     bool  // VmFlags has nh (MADV_NOHUGEPAGE)
}

func exeMappings(t *testing.T) []exeMapping {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []exeMapping
	var cur *exeMapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			cur = nil
			if len(fields) >= 6 && strings.Join(fields[5:], " ") == exe && (fields[1] == "r--p" || fields[1] == "r-xp") {
				lo, hi, _ := strings.Cut(fields[0], "-")
				s, _ := strconv.ParseUint(lo, 16, 64)
				e, _ := strconv.ParseUint(hi, 16, 64)
				out = append(out, exeMapping{start: uintptr(s), end: uintptr(e)})
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil || len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			cur.rss = n
		case "Anonymous:":
			cur.anon = n
		case "FilePmdMapped:":
			cur.pmdMapped = n
		case "VmFlags:":
			cur.noHuge = slices.Contains(fields[1:], "nh")
		}
	}
	return out
}

// trimMemory drops the clean pages of the binary's read-only mappings and
// never one that holds a private copy: the RELRO segment, written at start-up
// and then made read-only, would come back as the file's bytes (glibc's
// state in this static build; the GOT, and Go's own itabs, in a PIE build).
func TestTrimMemoryKeepsWrittenReadOnlyPages(t *testing.T) {
	before := exeMappings(t)
	written := map[uintptr][]byte{} // by start: the mappings with private pages
	var clean int64
	for _, m := range before {
		if m.anon > 0 {
			written[m.start] = readMem(t, m)
		} else {
			clean += m.rss
		}
	}
	if len(written) == 0 {
		t.Fatal("no read-only mapping of the binary with private pages: the test would prove nothing")
	}
	trimMemory()
	var cleanAfter int64
	for _, m := range exeMappings(t) {
		want, ok := written[m.start]
		if !ok {
			cleanAfter += m.rss
			continue
		}
		if !bytes.Equal(want, readMem(t, m)) {
			t.Errorf("mapping %#x-%#x changed under trimMemory", m.start, m.end)
		}
	}
	if cleanAfter >= clean {
		t.Errorf("clean read-only pages resident: %d kB before, %d kB after: nothing trimmed", clean, cleanAfter)
	}
	t.Logf("clean read-only pages resident: %d kB → %d kB; %d mapping(s) with written pages kept", clean, cleanAfter, len(written))
}

// SmallPagesForExecutable marks the binary's read-only mappings no-huge-page,
// and what the process maps of them again after a trim comes in 4 KiB pages:
// on a kernel whose page cache holds the binary in 2 MiB folios (ext4 on
// Linux 6.x), reading it all mapped most of it 2 MiB at a time before
// (FilePmdMapped), which a trim's gain did not survive.
func TestSmallPagesForExecutable(t *testing.T) {
	SmallPagesForExecutable()
	trimMemory()
	ms := exeMappings(t)
	if len(ms) == 0 {
		t.Fatal("no read-only mapping of the binary found")
	}
	for _, m := range ms {
		if !m.noHuge {
			t.Errorf("mapping %#x-%#x not marked nh", m.start, m.end)
		}
		readMem(t, m) // every page of it, as the process's own touches would
	}
	var rss int64
	for _, m := range exeMappings(t) {
		rss += m.rss
		if m.pmdMapped > 0 {
			t.Errorf("mapping %#x-%#x: %d kB mapped in 2 MiB pages", m.start, m.end, m.pmdMapped)
		}
	}
	t.Logf("read-only mappings of the binary: %d kB resident after reading all of them", rss)
}
