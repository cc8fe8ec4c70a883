// Package host is the one home of the facts about the node that the agent and
// the runtime both read from the kernel: its memory (/proc/meminfo) and its
// kernel release (uname). It links the standard library and x/sys/unix only,
// so that oci/ may import it too (tests/deps_test.go).
package host

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Meminfo is the kernel's file of memory facts.
const Meminfo = "/proc/meminfo"

// Memory is what a meminfo file says of the node's memory, in bytes.
type Memory struct {
	// Total is MemTotal: the machine memory capacity cAdvisor reports to the
	// kubelet. Never 0 when ReadMemory returns no error.
	Total uint64
	// Free is MemFree, 0 when the file has no such line.
	Free uint64
	// Available is MemAvailable, 0 when the file has no such line (kernels
	// before 3.14).
	Available uint64
}

// maxKB is the largest value in kB whose bytes still fit an int64, which is
// how the Kubernetes side counts them.
const maxKB = math.MaxInt64 / 1024

// ReadMemory reads and parses the meminfo file at path ("" is Meminfo), once.
// Lines are "Key: value kB"; of the keys it knows, the first line of each
// counts, a bare number is taken as kB as the kernel writes these, and a
// line that is not a count of kB is an error. A file without MemTotal (or
// with MemTotal 0) is an error. A read error is returned as it is, naming the
// file.
func ReadMemory(path string) (Memory, error) {
	if path == "" {
		path = Meminfo
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Memory{}, err
	}
	return parseMemory(path, string(data))
}

func parseMemory(path, data string) (Memory, error) {
	var m Memory
	fields := map[string]*uint64{"MemTotal": &m.Total, "MemFree": &m.Free, "MemAvailable": &m.Available}
	seen := map[string]bool{}
	for _, line := range strings.Split(data, "\n") {
		key, rest, ok := strings.Cut(line, ":")
		dst := fields[key]
		if !ok || dst == nil || seen[key] {
			continue
		}
		seen[key] = true
		f := strings.Fields(rest)
		if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			return Memory{}, fmt.Errorf("%s: bad %s line %q", path, key, line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > maxKB || (key == "MemTotal" && kb == 0) {
			return Memory{}, fmt.Errorf("%s: bad %s line %q", path, key, line)
		}
		*dst = kb * 1024
	}
	if !seen["MemTotal"] {
		return Memory{}, errors.New(path + ": no MemTotal")
	}
	return m, nil
}
