//go:build benchtrace

package daemon

import (
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
)

// A build for the idle benchmark only (tests/bench/idle.go): with
// STATICPODD_BENCH_TRACE set to a file, SIGUSR2 starts a runtime trace into
// it and the next SIGUSR2 ends it, so that the benchmark can say which
// goroutine each wake-up of an idle daemon woke; the allocations profile is
// written beside it at both ends (.allocs0, .allocs1: go tool pprof -base)
// to say what an idle daemon allocates, and so collects for. No build that
// ships has it: the daemon has no profiling surface.
func init() {
	path := os.Getenv("STATICPODD_BENCH_TRACE")
	if path == "" {
		return
	}
	runtime.MemProfileRate = 4096
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		for range sig {
			f, err := os.Create(path)
			if err != nil {
				continue
			}
			writeAllocs(path + ".allocs0")
			if err := trace.Start(f); err != nil {
				f.Close()
				continue
			}
			<-sig
			trace.Stop()
			f.Close()
			writeAllocs(path + ".allocs1")
		}
	}()
}

// writeAllocs writes the allocations profile after a collection: the
// profile is as of the last completed one, so without it the difference
// of the two ends counted what was allocated between the cycles before
// each end, not between the ends.
func writeAllocs(path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
}
