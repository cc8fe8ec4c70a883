package oci

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TrimMemory is trimMemory for the daemon, which calls it when it has been
// quiet for a while after its start or a burst of pod changes: what they
// touched and freed is given back, and what the quiet daemon uses comes
// back as it is used.
func TrimMemory() { trimMemory() }

// trimMemory gives back what a process needed only to start: the pages of
// its executable's code and read-only data that start-up touched (the
// package initializers of the whole binary, spread over all of it, so the
// kernel's fault-around maps nearly every page), and the heap it no longer
// uses. The executable's read-only mappings are unmapped page by page with
// MADV_DONTNEED: they are clean, so a later access maps the same page again
// from the page cache. Writable mappings are never touched. Best effort.
func trimMemory() {
	debug.FreeOSMemory()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	type span struct{ start, end uintptr }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00402000-0146a000 r-xp 00002000 fe:00 12929331   /usr/bin/staticpodd
		fields := strings.Fields(sc.Text())
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
		spans = append(spans, span{uintptr(start), uintptr(end)})
	}
	for _, s := range spans {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED)
	}
}
