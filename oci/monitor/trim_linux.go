package monitor

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TrimMemory is trimMemory for the daemon, which calls it when it has been
// quiet for a while after its start or a burst of pod changes: what they
// touched and freed is given back, and what the quiet daemon uses comes
// back as it is used. The executable's pages go as pageOutExePages says.
func TrimMemory() {
	debug.FreeOSMemory()
	pageOutExePages()
}

// SmallPagesForExecutable asks the kernel to map this process's executable
// 4 KiB at a time (MADV_NOHUGEPAGE on its read-only mappings), never 2 MiB at
// once. A kernel whose page cache holds the binary in large folios (ext4
// and XFS on Linux 6.x do) otherwise maps a whole 2 MiB folio on one touch:
// a daemon that had just trimmed was back to 38-42 MiB with 100 pods within
// seconds, 14 MiB of it mapped so (smaps' FilePmdMapped), from a handful of
// page faults. The pages themselves stay in the page cache, shared with the
// monitors and every container's init; only what this process maps, its
// RSS, changes. The advice belongs to these mappings alone: children and
// containers, which exec, do not inherit it (PR_SET_THP_DISABLE would
// follow them into every container). Best effort.
func SmallPagesForExecutable() {
	for _, m := range readOnlyExeMappings() {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_NOHUGEPAGE)
	}
}

// trimMemory gives back what a process needed only to start: the pages of
// its executable's code and read-only data that start-up touched (the
// package initializers of the whole binary, spread over all of it, so the
// kernel's fault-around maps nearly every page), and the heap it no longer
// uses. The executable's read-only mappings are unmapped page by page with
// MADV_DONTNEED, but only those that hold no private copy of a page: a clean
// page is mapped again from the page cache at its next access, while a
// written one would come back as the file's bytes. The read-only mapping of
// the RELRO segment is such a one (glibc's start-up and, in a dynamic or PIE
// build, the loader write it and then make it read-only), so a mapping whose
// smaps entry shows any Anonymous memory is left alone. Writable mappings
// are never touched. Best effort.
func trimMemory() {
	debug.FreeOSMemory()
	dropExePages()
}

// DropInitPages gives back, as trimMemory does, the pages of the
// executable, but not the heap: for the daemon once its package
// initializers have run. They are spread over the whole binary, so the
// kernel's fault-around mapped nearly every page of it for them, where what
// the daemon runs from then on is a fraction (10 pods dropped as the daemon
// answered peaked at 38 MiB with it, 54 without: docs/benchmarks.md). The
// heap they left is small, and a collection now would only delay the start;
// and the pages are only unmapped, not reclaimed as TrimMemory has them, for
// the same reason.
func DropInitPages() { dropExePages() }

// DropExecutablePages gives back the pages of the executable, but not the
// heap: for the daemon once its first sync is done, what its start touched of
// the binary. They are only unmapped, not reclaimed as TrimMemory has them:
// the pods of the first sync are starting, and what they need of the binary
// is better found in the page cache than read again from the disk.
func DropExecutablePages() { dropExePages() }

// dropExePages unmaps the clean pages of the executable's read-only
// mappings; they map again from the page cache as they are used. For a
// monitor, whose executable is the sealed memfd every monitor maps (or the
// daemon's binary, when the memfd cannot be used), and for the daemon's
// drops at start and after its first sync.
func dropExePages() { adviseExePages(unix.MADV_DONTNEED) }

// adviseExePages gives each madvise advice in turn to every read-only
// mapping of the executable that holds no private copy of a page.
func adviseExePages(advice ...int) {
	for _, m := range readOnlyExeMappings() {
		if !m.anonymous {
			for _, a := range advice {
				_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, uintptr(a))
			}
		}
	}
}

// pageOutExePages gives back the clean pages of the executable's read-only
// mappings as dropExePages does, and first asks the kernel to reclaim those
// no other process maps (MADV_PAGEOUT): for the daemon at rest, whose binary
// is a file. Unmapping alone gives back little when the page cache holds the
// binary in large folios, as a file system with large folios keeps a file
// read whole (cat, a checksum) or written as Go's linker writes its output
// (ext4 on Linux 6.18 does): a touch of any page after the drop maps its
// whole folio again (Linux 6.18 maps a large folio whole on a fault). So an
// idle daemon with no pod rested with 20.0 MiB of its binary mapped where
// the same binary read in by faults alone (small folios) rests with 7.9 MiB,
// and one running kubeadm's control plane with 28.1 MiB against 19.7
// (docs/benchmarks.md, "The binary's pages in large folios"). Only what is
// mapped is reclaimed, what the daemon touched since its last drop; the pages
// of its start stay cached for the next start. Reclaimed, the pages are read
// again as they are touched, a page and what the kernel reads around it at a
// time, in small folios, by the daemon or a process that maps the binary then
// (a CLI command), from the disk once. The kernel reclaims a file's pages so
// only for a process that owns the file or may write it (root does); a page
// another process maps is only unmapped from this one. Best effort: a kernel
// without MADV_PAGEOUT (before 5.4) only unmaps, and a folio the kernel
// passes over (one it cannot take at that moment) maps whole again.
func pageOutExePages() { adviseExePages(unix.MADV_PAGEOUT, unix.MADV_DONTNEED) }

// DropExePages gives back, as trimMemory does, the pages of this process's
// executable that lie wholly within the n bytes at p, where they are in a
// read-only mapping of it holding no private copy of a page: for a large
// read-only datum of the binary read once, such as the embedded monitor
// program, which would otherwise stay mapped until the next trim. Best effort.
func DropExePages(p unsafe.Pointer, n int) {
	page := uintptr(os.Getpagesize())
	start := (uintptr(p) + page - 1) &^ (page - 1)
	end := (uintptr(p) + uintptr(n)) &^ (page - 1)
	for _, m := range readOnlyExeMappings() {
		lo, hi := max(start, m.start), min(end, m.end)
		if !m.anonymous && lo < hi {
			_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_DONTNEED)
		}
	}
}

// roMapping is a read-only mapping of the executable, from smaps.
type roMapping struct {
	start, end uintptr
	anonymous  bool // holds private copies of pages (smaps' Anonymous > 0)
}

// readOnlyExeMappings lists this process's read-only mappings of its
// executable; none if smaps cannot be read.
func readOnlyExeMappings() []roMapping {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []roMapping
	var cur *roMapping // the exe's read-only mapping being read, until its Anonymous line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			if cur != nil {
				cur.anonymous = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")) != "0"
				out = append(out, *cur)
			}
			cur = nil
			continue
		}
		// 00402000-0146a000 r-xp 00002000 fe:00 12929331   /usr/bin/staticpodd
		fields := strings.Fields(line)
		if len(fields) < 5 || !strings.Contains(fields[0], "-") {
			continue // another field of the mapping's entry
		}
		cur = nil
		if len(fields) < 6 || strings.Join(fields[5:], " ") != exe {
			continue
		}
		if perms := fields[1]; perms != "r-xp" && perms != "r--p" {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		cur = &roMapping{start: uintptr(start), end: uintptr(end)}
	}
	return out
}
