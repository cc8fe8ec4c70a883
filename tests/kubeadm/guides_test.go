//go:build linux

package kubeadm

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// guideBlocks are the command lines of a guide's sh blocks and the files of
// its yaml blocks, each named on its first line (# NAME).
func guideBlocks(t *testing.T, path string) (commands []string, files map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files = map[string]string{}
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
				t.Errorf("%s: a yaml block names no file on its first line (# NAME): %q", path, first)
				continue
			}
			files[name] = body
		default:
			t.Errorf("%s: a %q block: the test knows sh and yaml", path, m[1])
		}
	}
	return commands, files
}

// TestPrometheusGuideIsTested: the Prometheus guide's commands are the ones
// TestKubeadm runs, in its order, and its files the ones it writes.
func TestPrometheusGuideIsTested(t *testing.T) {
	commands, files := guideBlocks(t, "../../docs/guides/prometheus.md")
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

// TestMirrorGuideIsTested: the mirror pods guide's commands are the ones
// TestKubeadm runs, in its order.
func TestMirrorGuideIsTested(t *testing.T) {
	commands, files := guideBlocks(t, "../../docs/guides/mirror-pods.md")
	if !slices.Equal(commands, mirrorGuideCommands) {
		t.Errorf("the guide's commands:\n%s\nthe test's:\n%s", strings.Join(commands, "\n"), strings.Join(mirrorGuideCommands, "\n"))
	}
	if len(files) > 0 {
		t.Errorf("the guide gives files the test does not write: %v", files)
	}
}
