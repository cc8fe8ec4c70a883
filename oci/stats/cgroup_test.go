package stats

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestReadUsage(t *testing.T) {
	v1 := Dirs{
		"memory":  "testdata/cgroup/v1/memory",
		"cpuacct": "testdata/cgroup/v1/cpuacct",
		"cpu":     "testdata/cgroup/v1/cpu",
		"pids":    "testdata/cgroup/v1/pids",
	}
	v2 := Dirs{"": "testdata/cgroup/v2"}
	want := podspec.Usage{
		MemoryUsage:      100 << 20,
		MemoryWorkingSet: 80 << 20, // 100Mi − 20Mi inactive_file
		MemoryRSS:        60 << 20,
		MemoryCache:      40 << 20, // v2's file, v1's total_cache
		Pids:             7,
		// cpu.stat: v2 counts throttled_usec, v1 throttled_time in ns.
		CPUPeriods: 50, CPUThrottledPeriods: 5, CPUThrottledNanos: 2500000,
	}
	for _, tc := range []struct {
		name string
		dirs Dirs
		cpu  uint64
	}{
		{"v1", v1, 123456789},
		{"v2", v2, 123456000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadUsage(tc.dirs)
			if err != nil {
				t.Fatal(err)
			}
			w := want
			w.CPUUsageNanos = tc.cpu
			if got != w {
				t.Errorf("ReadUsage = %+v, want %+v", got, w)
			}
		})
	}
	t.Run("missing cgroup", func(t *testing.T) {
		_, err := ReadUsage(Dirs{"": filepath.Join(t.TempDir(), "gone")})
		if !os.IsNotExist(err) {
			t.Errorf("err = %v, want not exist", err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "memory.current"), []byte("lots\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "memory.stat"), []byte("inactive_file x\nnoise\n"), 0o644)
		if _, err := ReadUsage(Dirs{"": dir}); err == nil {
			t.Error("want an error for a memory.current that is no number")
		}
	})
	t.Run("working set never negative", func(t *testing.T) {
		if ws := workingSet(10, 20); ws != 0 {
			t.Errorf("workingSet(10, 20) = %d", ws)
		}
	})
}

func TestReadLimits(t *testing.T) {
	mem, pids, err := ReadLimits(Dirs{"memory": "testdata/cgroup/v1/memory", "pids": "testdata/cgroup/v1/pids"})
	if err != nil || mem != 256<<20 || pids != 100 {
		t.Errorf("v1: %d %d %v", mem, pids, err)
	}
	mem, pids, err = ReadLimits(Dirs{"": "testdata/cgroup/v2"})
	if err != nil || mem != 256<<20 || pids != 0 {
		t.Errorf("v2: %d %d %v, want max pids as 0", mem, pids, err)
	}
}

// readSmall's buffer outlives the collector's cycles: the housekeeping
// every 10 s, with a cycle or two between, read into a new 16 KiB buffer
// each time the pool had been emptied.
func TestReadSmallKeepsItsBufferAcrossCycles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "memory.current")
	if err := os.WriteFile(p, []byte("12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() {
		if err := readSmall(p, func(b []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const reads = 8
	for range reads {
		runtime.GC()
		runtime.GC()
		read()
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got >= smallFileMax {
		t.Errorf("%d reads, each after two cycles, allocated %d bytes, want less than one buffer (%d)", reads, got, smallFileMax)
	}
}
