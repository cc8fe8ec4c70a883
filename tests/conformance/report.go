package conformance

import (
	"regexp"
	"strings"
)

// stampRE is the name of an AtomicWriter's timestamped directory
// (..2026_12_05_12_20_11.123456789), which differs between any two writes.
var stampRE = regexp.MustCompile(`\.\.\d{4}(_\d\d){5}\.\d+`)

// ParseReport turns what the pod of testdata/objects writes (sections headed
// "# name": its id, its environment one NAME=value a line, each volume's
// entries one a line with a file's content after it as "  | " lines, the
// subPath file, the volumes' file system types) into fields Compare takes:
// the path is the section and the entry's name (the variable, the file, the
// mount point), the value the rest of its line and its content.
func ParseReport(report string) []Field {
	report = stampRE.ReplaceAllString(report, "..<timestamp>")
	var out []Field
	section := ""
	for _, line := range strings.Split(report, "\n") {
		if name, ok := strings.CutPrefix(line, "# "); ok {
			section = name
			continue
		}
		if content, ok := strings.CutPrefix(line, "  |"); ok {
			if n := len(out); n > 0 {
				out[n-1].Value += "\n|" + content
			}
			continue
		}
		if line == "" {
			continue
		}
		sep := " "
		if section == "env" {
			sep = "="
		}
		key, value, ok := strings.Cut(line, sep)
		if !ok {
			key, value = "", line
		}
		out = append(out, Field{Path: section + " " + key, Value: value})
	}
	return out
}
