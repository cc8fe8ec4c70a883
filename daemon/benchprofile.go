//go:build benchprofile

package daemon

import (
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
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
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go http.ListenAndServe(addr, mux)
}
