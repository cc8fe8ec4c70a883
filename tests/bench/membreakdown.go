package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The memory benchmark's breakdown (-memory-breakdown): where the daemon's
// RSS at rest goes. The binary's pages it maps, per ELF section (from
// /proc/PID/pagemap: a page counts when it is mapped in this process,
// whether or not other processes map it too); its anonymous memory per
// mapping kind (smaps); and, from a daemon built with -tags benchprofile and
// given STATICPODD_BENCH_PPROF, the Go runtime's own accounts (heap in use,
// free, given back; stacks; the runtime's structures) and the goroutines by
// where they wait.

// memBreakdown is one daemon's RSS at rest, taken apart.
type memBreakdown struct {
	sections []sectionRSS // the binary's sections, in address order
	anonExe  int64        // anonymous pages of the binary's writable mappings (data, bss)
	anonHeap int64        // other anonymous mappings: Go's heap arenas, stacks, runtime structures
	other    int64        // everything else (file mappings not of the binary)
	memStats []string     // "Name = value" lines of runtime.MemStats, if the daemon serves pprof
	routines []string     // goroutine counts by the place they wait, if the daemon serves pprof
}

type sectionRSS struct {
	name     string
	size     int64 // the section's size
	resident int64 // of it, mapped in the process
}

// breakdownOf takes pid's memory apart; exe is the binary it runs, pprof the
// address of its benchprofile handlers or "".
func breakdownOf(pid int, exe, pprof string) (memBreakdown, error) {
	var b memBreakdown
	f, err := elf.Open(exe)
	if err != nil {
		return b, err
	}
	defer f.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return b, err
	}
	defer pm.Close()
	page := int64(os.Getpagesize())
	var entry [8]byte
	for _, s := range f.Sections {
		if s.Addr == 0 || s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_WRITE != 0 {
			continue // the writable ones are anonymous once touched: below
		}
		r := sectionRSS{name: s.Name, size: int64(s.Size)}
		// A page shared by two sections counts for the first.
		for p := int64(s.Addr) &^ (page - 1); p < int64(s.Addr+s.Size); p += page {
			if _, err := pm.ReadAt(entry[:], p/page*8); err != nil {
				return b, err
			}
			if binary.LittleEndian.Uint64(entry[:])&(1<<63) != 0 {
				r.resident += page
			}
		}
		b.sections = append(b.sections, r)
	}
	sm, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return b, err
	}
	defer sm.Close()
	var isExe, isAnon bool
	sc := bufio.NewScanner(sm)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			name := strings.Join(fields[5:], " ")
			isExe = name == exe
			isAnon = name == "" || name == "[heap]" || name == "[stack]"
			continue
		}
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			if !isExe && !isAnon {
				b.other += kb << 10
			}
		case "Anonymous:":
			if isExe {
				b.anonExe += kb << 10
			} else if isAnon {
				b.anonHeap += kb << 10
			}
		}
	}
	if pprof == "" {
		return b, nil
	}
	heap, err := httpText("http://" + pprof + "/debug/pprof/heap?debug=1")
	if err != nil {
		return b, err
	}
	for _, line := range strings.Split(heap, "\n") {
		if v, ok := strings.CutPrefix(line, "# "); ok && strings.Contains(v, " = ") {
			switch name, _, _ := strings.Cut(v, " "); name {
			case "HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "Stack", "MSpan",
				"MCache", "BuckHashSys", "GCSys", "OtherSys", "Sys", "NextGC", "NumGC":
				b.memStats = append(b.memStats, v)
			}
		}
	}
	gs, err := httpText("http://" + pprof + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return b, err
	}
	// "goroutine profile: total N", then per group "K @ pcs" and its frames
	// "#\t0x... func+0x.. file:line": a group is named by its first frame
	// outside the runtime and the standard library's waits.
	lines := strings.Split(gs, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "goroutine profile:") {
			b.routines = append(b.routines, line)
			continue
		}
		count, _, ok := strings.Cut(line, " @ ")
		if !ok {
			continue
		}
		where := ""
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "#") {
			i++
			f := strings.Fields(lines[i])
			if len(f) >= 3 && where == "" && !waitFrame(f[2]) {
				where = f[2]
			}
		}
		b.routines = append(b.routines, count+" "+where)
	}
	return b, nil
}

// waitFrame says whether a stack frame is one of the runtime's or the
// standard library's waits rather than the code that waits.
func waitFrame(fn string) bool {
	for _, p := range []string{"runtime.", "internal/", "sync.", "time.", "os/signal.", "os.(*Process)", "syscall.", "net.", "bufio.", "io.", "os.(*File)", "net/http.(*conn)", "net/http.(*persistConn)", "context."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

func httpText(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return string(b), err
}

// print writes the breakdown as the lines of a Markdown list.
func (b memBreakdown) print(w io.Writer) {
	var file int64
	for _, s := range b.sections {
		file += s.resident
	}
	fmt.Fprintf(w, "- the binary's read-only pages mapped: %s", mib(file))
	ss := slices.Clone(b.sections)
	slices.SortFunc(ss, func(x, y sectionRSS) int { return int(y.resident - x.resident) })
	for _, s := range ss {
		if s.resident >= 64<<10 {
			fmt.Fprintf(w, "; %s %s of %s", s.name, mib(s.resident), mib(s.size))
		}
	}
	fmt.Fprintf(w, "\n- anonymous: %s in the binary's data and bss, %s in other mappings (Go's heap, stacks, runtime structures); other mappings' RSS %s\n",
		mib(b.anonExe), mib(b.anonHeap), mib(b.other))
	if len(b.memStats) > 0 {
		fmt.Fprintf(w, "- runtime.MemStats: %s\n", strings.Join(b.memStats, ", "))
	}
	if len(b.routines) > 0 {
		fmt.Fprintf(w, "- goroutines: %s\n", strings.Join(b.routines, "; "))
	}
}
