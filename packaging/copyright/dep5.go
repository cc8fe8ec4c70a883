package main

import (
	"io"
	"sort"
	"strings"
)

// field is one field of a DEP-5 paragraph; a value of several lines is
// written with its first line after the name and the others indented.
type field struct{ name, value string }

type paragraph []field

// document is a machine-readable debian/copyright file, format 1.0
// (https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/).
type document struct {
	header   paragraph
	files    []paragraph
	licences []paragraph // stand-alone License paragraphs, one per short name
	ids      []string    // every licence in the package, for the rpm expression
}

func (d *document) write(w io.Writer) {
	var b strings.Builder
	all := append(append([]paragraph{d.header}, d.files...), d.licences...)
	for i, p := range all {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, f := range p {
			writeField(&b, f)
		}
	}
	io.WriteString(w, b.String())
}

func writeField(b *strings.Builder, f field) {
	lines := strings.Split(f.value, "\n")
	b.WriteString(f.name + ":")
	if lines[0] != "" {
		b.WriteString(" " + lines[0])
	}
	b.WriteString("\n")
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			l = "."
		}
		b.WriteString(" " + l + "\n")
	}
}

// expression is the SPDX licence expression of the whole package, for the
// rpm License tag: staticpodd's own licence first, then the others sorted.
func (d *document) expression() string {
	seen := map[string]bool{ownLicence: true}
	rest := []string{}
	for _, id := range d.ids {
		if !seen[id] {
			seen[id] = true
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	return strings.Join(append([]string{ownLicence}, rest...), " AND ")
}

// withText is a License field: the short name, then the text on the
// continuation lines.
func withText(expr, text string) string { return expr + "\n" + text }

func sortStrings(s []string) {
	sort.Slice(s, func(i, j int) bool {
		if (s[i] == ownLicence) != (s[j] == ownLicence) {
			return s[i] == ownLicence
		}
		return s[i] < s[j]
	})
}
