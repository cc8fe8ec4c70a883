//go:build benchtrace

package daemon

import (
	"os"
	"os/signal"
	"runtime/trace"
	"syscall"
)

// A build for the idle benchmark only (tests/bench/idle.go): with
// STATICPODD_BENCH_TRACE set to a file, SIGUSR2 starts a runtime trace into
// it and the next SIGUSR2 ends it, so that the benchmark can say which
// goroutine each wake-up of an idle daemon woke. No build that ships has it:
// the daemon has no profiling surface.
func init() {
	path := os.Getenv("STATICPODD_BENCH_TRACE")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		for range sig {
			f, err := os.Create(path)
			if err != nil {
				continue
			}
			if err := trace.Start(f); err != nil {
				f.Close()
				continue
			}
			<-sig
			trace.Stop()
			f.Close()
		}
	}()
}
