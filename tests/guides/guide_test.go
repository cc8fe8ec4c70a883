// Package guides holds the tests of docs/guides that make test-guides runs in a
// booted machine (run.sh); this file keeps each guide's text and its test's
// commands the same.
package guides

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A guide and its test: the commands of the guide's sh blocks are, in order, the
// `guide '...'` lines of script, and its yaml and bash blocks, in order, the
// contents of these files (a manifest the reader writes, the test uses).
var guides = []struct {
	guide, script string
	yaml, bash    []string
}{
	{guide: "install.md", script: "install-check.sh", yaml: []string{"install/web.yaml", "install/typo.yaml"}},
	{guide: "appliance.md", script: "run.sh", yaml: []string{"appliance/manifests/web.yaml", "appliance/manifests/clock.yaml"},
		bash: []string{"appliance/check.sh"}},
}

// blocks returns the lines of each fenced block of the guide, by language.
func blocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	var lang string
	var block strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if l, ok := strings.CutPrefix(line, "```"); ok {
			if in {
				out[lang] = append(out[lang], block.String())
				block.Reset()
			}
			in, lang = !in, l
			continue
		}
		if in {
			block.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if in {
		t.Fatalf("%s: a block is not closed", path)
	}
	return out
}

var guideLine = regexp.MustCompile(`^\s*guide '(.*)'$`)

func TestGuidesAreTested(t *testing.T) {
	for _, g := range guides {
		t.Run(g.guide, func(t *testing.T) {
			b := blocks(t, filepath.Join("../../docs/guides", g.guide))
			var commands []string
			for _, block := range b["sh"] {
				for _, line := range strings.Split(block, "\n") {
					if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
						commands = append(commands, line)
					}
				}
			}
			script, err := os.ReadFile(g.script)
			if err != nil {
				t.Fatal(err)
			}
			var ran []string
			for _, line := range strings.Split(string(script), "\n") {
				if m := guideLine.FindStringSubmatch(line); m != nil {
					ran = append(ran, m[1])
				}
			}
			if len(ran) == 0 {
				t.Fatalf("%s runs no command of the guide", g.script)
			}
			if !slices.Equal(commands, ran) {
				t.Errorf("the guide's commands are not those %s runs, in order:\nguide:\n  %s\ntest:\n  %s",
					g.script, strings.Join(commands, "\n  "), strings.Join(ran, "\n  "))
			}
			for lang, files := range map[string][]string{"yaml": g.yaml, "bash": g.bash} {
				if len(b[lang]) != len(files) {
					t.Errorf("the guide has %d %s blocks, the test uses %d files", len(b[lang]), lang, len(files))
					continue
				}
				for i, file := range files {
					want, err := os.ReadFile(file)
					if err != nil {
						t.Fatal(err)
					}
					if b[lang][i] != string(want) {
						t.Errorf("the guide's %s block %d is not %s, which the test uses:\nguide:\n%s\n%s:\n%s", lang, i+1, file, b[lang][i], file, want)
					}
				}
			}
		})
	}
}
