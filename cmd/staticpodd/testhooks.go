package main

import "github.com/spf13/pflag"

// testHooks are run's hidden flags for tests and benchmarks
// (docs/configuration.md, "Test-only settings"). They are flags rather than
// environment variables, so that nothing a real machine's environment
// carries (a unit's Environment=, a shell profile) turns one on unseen, and
// hidden from --help: never set them on a real machine.
type testHooks struct {
	// nodeCgroup names a cgroupfs cgroup whose memory and pids limits stand
	// for the node's: a test makes real node pressure inside it without
	// starving the machine.
	nodeCgroup string
	// noMemoryNotifier turns the memory threshold notifier off: memory
	// pressure is found by polling alone, to measure what the notifier gains.
	noMemoryNotifier bool
}

func (h *testHooks) register(fs *pflag.FlagSet) {
	fs.StringVar(&h.nodeCgroup, "test-node-cgroup", "", "for tests only: a cgroupfs cgroup whose memory and pids limits and usage stand for the node's")
	fs.BoolVar(&h.noMemoryNotifier, "test-no-memory-notifier", false, "for benchmarks only: no memory threshold notifier, memory pressure found by polling alone")
	for _, name := range []string{"test-node-cgroup", "test-no-memory-notifier"} {
		if err := fs.MarkHidden(name); err != nil {
			panic(err) // a flag registered just above
		}
	}
}
