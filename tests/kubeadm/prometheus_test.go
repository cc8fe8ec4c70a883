//go:build linux

package kubeadm

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPrometheusGuideIsTested: the Prometheus guide's commands are the ones
// TestKubeadm runs, in its order, and its files the ones it writes.
func TestPrometheusGuideIsTested(t *testing.T) {
	b, err := os.ReadFile("../../docs/guides/prometheus.md")
	if err != nil {
		t.Fatal(err)
	}
	var commands []string
	files := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)```(\\w+)\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		switch m[1] {
		case "sh":
			for _, line := range strings.Split(m[2], "\n") {
				if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
					commands = append(commands, line)
				}
			}
		case "yaml":
			first, body, _ := strings.Cut(m[2], "\n")
			name, ok := strings.CutPrefix(first, "# ")
			if !ok {
				t.Errorf("a yaml block of the guide names no file on its first line (# NAME): %q", first)
				continue
			}
			files[name] = body
		default:
			t.Errorf("a %q block in the guide: the test knows sh and yaml", m[1])
		}
	}
	if !slices.Equal(commands, promCommands) {
		t.Errorf("the guide's commands:\n%s\nthe test's:\n%s", strings.Join(commands, "\n"), strings.Join(promCommands, "\n"))
	}
	for name, want := range promFiles {
		if files[name] != want {
			t.Errorf("the guide's %s:\n%s\nthe test's:\n%s", name, files[name], want)
		}
	}
	for name := range files {
		if _, ok := promFiles[name]; !ok {
			t.Errorf("the guide gives %s, which the test does not write", name)
		}
	}
}
