//go:build benchprofile

package daemon

import (
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
)

// Only in a benchmark's build (-tags benchprofile): the daemon's pprof
// handlers on STATICPODD_BENCH_PPROF's address, with the block and mutex
// profiles on, to find what a large drop of pods spends its time on. A
// release build has no such surface.
func init() {
	addr := os.Getenv("STATICPODD_BENCH_PPROF")
	if addr == "" || len(os.Args) < 2 || os.Args[1] != "run" {
		return
	}
	runtime.SetBlockProfileRate(100_000) // one event per 100 µs blocked
	runtime.SetMutexProfileFraction(10)
	// STATICPODD_BENCH_MEMPROFILERATE: sample the heap finer than one
	// allocation per 512 KiB, to take the memory a pod keeps apart by item.
	if r, err := strconv.Atoi(os.Getenv("STATICPODD_BENCH_MEMPROFILERATE")); err == nil && r > 0 {
		runtime.MemProfileRate = r
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go http.ListenAndServe(addr, mux)
}
