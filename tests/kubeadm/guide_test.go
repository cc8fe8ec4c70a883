//go:build linux

package kubeadm

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

const guide = "../../docs/guides/kubeadm-air-gapped.md"

// TestGuideCommandsAreTested: every command in a shell block of the guide is
// one TestKubeadm runs as written, and its kubeadm.yaml is the test's.
func TestGuideCommandsAreTested(t *testing.T) {
	f, err := os.Open(guide)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ran := guideCommands()
	var block string // the fence's language inside a block, "" outside
	var yaml strings.Builder
	commands := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lang, ok := strings.CutPrefix(line, "```"); ok {
			if block == "" {
				block = lang
			} else {
				block = ""
			}
			continue
		}
		switch {
		case block == "sh" && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#"):
			commands++
			if !slices.Contains(ran, line) {
				t.Errorf("the guide gives a command make test-kubeadm does not run: %q", line)
			}
		case block == "yaml":
			yaml.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if commands < len(ran) {
		t.Errorf("the guide gives %d commands, the test runs %d as the guide's: the guide misses some", commands, len(ran))
	}
	if want := fmt.Sprintf(kubeadmYAML, "192.0.2.10", "cp1"); yaml.String() != want {
		t.Errorf("the guide's kubeadm.yaml:\n%s\nthe test's:\n%s", yaml.String(), want)
	}
}
