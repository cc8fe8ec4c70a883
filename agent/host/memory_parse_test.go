package host

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// splitParseMemory is parseMemory as it was, with strings.Split and
// strings.Fields: the in-place parser must give the same for any input.
func splitParseMemory(path, data string) (Memory, error) {
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

func meminfoOdd() []string {
	long := strings.Repeat("7", 100<<10)
	return []string{
		"", "\n", ":", "MemTotal", "MemTotal:", "MemTotal: 1", "MemTotal: 1 kB\n",
		"MemTotal:1kB\n", "MemTotal:\t1\tkB\r\n", "MemTotal: 1 kB\r\n", "MemTotal: 1 kb\n",
		" MemTotal: 1 kB\n", "MemTotal : 1 kB\n", "memtotal: 1 kB\n",
		"MemTotal: 1 kB\nMemFree: 2 kB\nMemAvailable: 3 kB\n",
		"MemFree: 2 kB\nMemTotal: 1 kB\nMemFree: x\nMemAvailable: 3\nMemAvailable: y\n",
		"MemTotal: 1 kB\nMemFree:\n", "MemTotal: 1 kB\nMemAvailable: 1 2 3\n",
		"MemTotal: 9007199254740991 kB\n", "MemTotal: 9007199254740992 kB\n",
		"MemTotal: 18446744073709551615 kB\n", "MemTotal: 18446744073709551616 kB\n",
		"MemTotal: " + strings.Repeat("1", 40) + " kB\n",
		"MemTotal: -1 kB\n", "MemTotal: +1 kB\n", "MemTotal: 0x10 kB\n", "MemTotal: 1_0 kB\n",
		"MemTotal:\u00a01\u2003kB\u0085\n", "MemTotal: 1\xffkB\n", "MemTotal: 1 \xff\n",
		"MemTotal: 1 kB\x00\n", "Mem\x00Total: 1 kB\n",
		"MemTotal: " + long + " kB\n", "Junk: " + long + "\nMemTotal: 5 kB\n",
		"MemTotal: 1 kB\n" + long,
	}
}

func TestParseMemorySameAsSplit(t *testing.T) {
	for _, in := range meminfoOdd() {
		got, err := parseMemory("p", []byte(in))
		want, wantErr := splitParseMemory("p", in)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || got != want {
			t.Errorf("%.80q: got %+v, %v; the split parser's %+v, %v", in, got, err, want, wantErr)
		}
	}
}

func FuzzParseMemory(f *testing.F) {
	for _, in := range meminfoOdd() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseMemory("p", []byte(in))
		want, wantErr := splitParseMemory("p", in)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || got != want {
			t.Errorf("%q: got %+v, %v; the split parser's %+v, %v", in, got, err, want, wantErr)
		}
	})
}
