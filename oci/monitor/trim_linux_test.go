//go:build linux && cgo

package monitor

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
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
// The daemon's TrimMemory, which pages them out first, keeps them too.
func TestTrimMemoryKeepsWrittenReadOnlyPages(t *testing.T) {
	for _, trim := range []struct {
		name string
		f    func()
	}{{"trimMemory", trimMemory}, {"TrimMemory", TrimMemory}} {
		t.Run(trim.name, func(t *testing.T) {
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
			trim.f()
			var cleanAfter int64
			for _, m := range exeMappings(t) {
				want, ok := written[m.start]
				if !ok {
					cleanAfter += m.rss
					continue
				}
				if !bytes.Equal(want, readMem(t, m)) {
					t.Errorf("mapping %#x-%#x changed under %s", m.start, m.end, trim.name)
				}
			}
			if cleanAfter >= clean {
				t.Errorf("clean read-only pages resident: %d kB before, %d kB after: nothing trimmed", clean, cleanAfter)
			}
			t.Logf("clean read-only pages resident: %d kB → %d kB; %d mapping(s) with written pages kept", clean, cleanAfter, len(written))
			// What the next subtest trims: all of it mapped again.
			for _, m := range exeMappings(t) {
				readMem(t, m)
			}
		})
	}
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

// pageOutChildEnv makes the test binary TestPageOutExePages's child: it maps
// its executable whole, gives its pages back the way the variable names
// ("drop": dropExePages; "pageout": TrimMemory, the daemon's trim at rest,
// which calls pageOutExePages), touches one byte in every pageOutStride of it, and
// prints the kB its read-only mappings then hold and how many of their
// mapped pages belong to large folios.
const pageOutChildEnv = "STATICPODD_TEST_PAGEOUT_CHILD"

const pageOutStride = 512 << 10

// pageOutHidden is what the child says when pagemap hides the page frames.
const pageOutHidden = "pfn hidden"

// A page cache that holds the binary in large folios (a file read whole, on
// ext4 with Linux 6.18, which also maps a large folio whole on a fault) gives a drop by MADV_DONTNEED little to keep: any touch maps the
// touched page's whole folio again. pageOutExePages has the kernel reclaim
// what no other process maps, so that it comes back in small folios, a page
// and its neighbours at a time. The binary is a copy of this test's, read
// whole with read(2) as cat or a package's checksum reads it, then run as
// the child twice, once with each way of giving pages back.
func TestPageOutExePages(t *testing.T) {
	if mode := os.Getenv(pageOutChildEnv); mode != "" {
		pageOutChild(mode)
		return
	}
	testroot.Require(t) // the child reads /proc/kpageflags and pagemap's page frames
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC {
		// Its pages are the file: MADV_PAGEOUT cannot drop them (without
		// swap), and a tmpfs mounted huge=always or within_size keeps them
		// in large folios whatever is done.
		t.Skipf("%s is on tmpfs or ramfs, whose pages cannot be reclaimed to a disk", dir)
	}
	exe := filepath.Join(dir, "pageout.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	writeSynced(t, exe, b)
	type result struct{ rss, large int64 }
	got := map[string]result{}
	for _, mode := range []string{"drop", "pageout"} {
		readWhole(t, exe)
		cmd := exec.Command(exe, "-test.run=^TestPageOutExePages$")
		cmd.Env = append(os.Environ(), pageOutChildEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child (%s): %v\n%s", mode, err, out)
		}
		if bytes.HasPrefix(out, []byte(pageOutHidden)) {
			t.Skip("/proc/self/pagemap gives no page frame numbers (CAP_SYS_ADMIN is needed): folios cannot be seen")
		}
		var r result
		if _, err := fmt.Sscanf(string(out), "rss %d large %d\n", &r.rss, &r.large); err != nil {
			t.Fatalf("child (%s) said %q: %v", mode, out, err)
		}
		got[mode] = r
	}
	drop, pageout := got["drop"], got["pageout"]
	t.Logf("%d MB binary read whole, then mapped whole, given back and touched every %d KiB: "+
		"after MADV_DONTNEED %d kB mapped (%d pages of large folios), after pageOutExePages %d kB (%d)",
		len(b)>>20, pageOutStride>>10, drop.rss, drop.large, pageout.rss, pageout.large)
	if drop.large == 0 {
		t.Skip("the page cache holds this binary in small folios here: nothing to show")
	}
	// MADV_PAGEOUT is best effort: a folio the kernel cannot take at that
	// moment (off its LRU list in a CPU's batch, or with a reference held)
	// is passed over, and then mapped whole again. One such 1 MiB folio was
	// left in about 1 run of 20 on 2 CPUs.
	if pageout.large*2 > drop.large {
		t.Errorf("after pageOutExePages, %d mapped pages of the binary are still of large folios, against %d after dropExePages", pageout.large, drop.large)
	}
	if pageout.rss >= drop.rss {
		t.Errorf("after pageOutExePages %d kB of the binary mapped again, not less than the %d kB after dropExePages", pageout.rss, drop.rss)
	}
}

// writeSynced writes b to a new executable file at path and waits until it
// is on the disk: dirty pages, or pages still under writeback, are neither
// dropped by readWhole's FADV_DONTNEED nor reclaimed by MADV_PAGEOUT, so a
// slow disk would otherwise leave the child mapping the write's large
// folios whichever way it gives them back.
func writeSynced(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readWhole takes path out of the page cache and reads it whole with
// read(2), as cat does: the kernel's readahead then caches it in the largest
// folios it makes.
func readWhole(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, f); err != nil {
		t.Fatal(err)
	}
}

func pageOutChild(mode string) {
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ms := readOnlyExeMappings()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		fail(err)
	}
	var one [1]byte
	touch := func(stride uintptr) {
		for _, m := range ms {
			for p := m.start; p < m.end; p += stride {
				_, _ = mem.ReadAt(one[:], int64(p))
			}
		}
	}
	touch(4096) // all of it, as a start's package initializers do
	switch mode {
	case "drop":
		dropExePages()
	case "pageout":
		TrimMemory() // the daemon's, as it calls it
	}
	touch(pageOutStride)
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		fail(err)
	}
	flags, err := os.Open("/proc/kpageflags") // root's only
	if err != nil {
		fail(err)
	}
	var mapped, large int64
	var e [8]byte
	for _, m := range ms {
		for p := m.start; p < m.end; p += 4096 {
			if _, err := pagemap.ReadAt(e[:], int64(p/4096*8)); err != nil {
				fail(err)
			}
			v := binary.LittleEndian.Uint64(e[:])
			if v>>63 == 0 { // not present
				continue
			}
			mapped++
			pfn := v & (1<<55 - 1)
			if pfn == 0 {
				// Zeroed for a process without CAP_SYS_ADMIN (a
				// container's root): every page would read as pfn 0's.
				fmt.Println(pageOutHidden)
				os.Exit(0)
			}
			if _, err := flags.ReadAt(e[:], int64(pfn*8)); err != nil {
				fail(err)
			}
			// KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL
			if f := binary.LittleEndian.Uint64(e[:]); f&(1<<15|1<<16) != 0 {
				large++
			}
		}
	}
	fmt.Printf("rss %d large %d\n", mapped*4, large)
	os.Exit(0)
}
