package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ownFileParagraph returns a Files paragraph for one of staticpodd's files
// whose leading comment carries a copyright line: a file copied from another
// project keeps its origin and licence there (agent/manifest/expansion.go).
// ok is false for a file without one; p is nil when its licence is unknown.
func ownFileParagraph(root, rel string) (p paragraph, ok bool, err error) {
	header, err := leadingComment(filepath.Join(root, rel))
	if err != nil {
		return nil, false, err
	}
	holders := copyrightLines(header)
	if len(holders) == 0 {
		return nil, false, nil
	}
	ids := classify(header)
	if len(ids) == 0 {
		return nil, true, nil
	}
	origin, _, _ := strings.Cut(header, "\n\n")
	return paragraph{
		{"Files", rel},
		{"Copyright", strings.Join(holders, "\n")},
		{"License", withText(strings.Join(ids, " and "), header)},
		{"Comment", origin},
	}, true, nil
}

// leadingComment is the comment block a .go or .c file starts with (// lines
// or one /* */ block), without its comment markers.
func leadingComment(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("read header of %s: %w", name, err)
	}
	defer f.Close()
	var lines []string
	block := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		switch {
		case block:
			end := strings.Contains(t, "*/")
			t, _, _ = strings.Cut(t, "*/")
			t = strings.TrimPrefix(strings.TrimPrefix(t, "*"), " ")
			lines = append(lines, t)
			if end {
				return normalise(strings.Join(lines, "\n")), nil
			}
			continue
		case len(lines) == 0 && strings.HasPrefix(t, "/*"):
			block = true
			t = strings.TrimPrefix(t, "/*")
			if before, _, ok := strings.Cut(t, "*/"); ok {
				return normalise(before), nil
			}
			lines = append(lines, strings.TrimSpace(t))
			continue
		case t == "":
			lines = append(lines, "")
			continue
		case !strings.HasPrefix(t, "//"):
		default:
			lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(t, "//"), " "))
			continue
		}
		break
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read header of %s: %w", name, err)
	}
	return normalise(strings.Join(lines, "\n")), nil
}
