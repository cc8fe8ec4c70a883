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
	licences []standalone // stand-alone License paragraphs, one per short name
	ids      []string     // every licence in the package, for the rpm expression
}

// standalone is the text of a licence that modules name without it.
type standalone struct{ id, notice, text string }

// debianCommonLicenses names the file in /usr/share/common-licenses that
// holds each canonical licence on Debian, where policy 12.5 wants the
// copyright file to refer to it rather than repeat it.
var debianCommonLicenses = map[string]string{
	"Apache-2.0": "Apache-2.0", "MPL-2.0": "MPL-2.0", "MPL-1.1": "MPL-1.1", "CC0-1.0": "CC0-1.0",
	"GPL-2.0": "GPL-2", "GPL-3.0": "GPL-3", "LGPL-2.1": "LGPL-2.1", "LGPL-3.0": "LGPL-3",
	"LGPL-2.1-only": "LGPL-2.1", "LGPL-2.1-or-later": "LGPL-2.1",
}

// write writes the file; debian refers to /usr/share/common-licenses for
// the licences found there instead of giving their full text.
func (d *document) write(w io.Writer, debian bool) {
	var b strings.Builder
	all := append([]paragraph{d.header}, d.files...)
	for _, l := range d.licences {
		text := l.text
		if f, ok := debianCommonLicenses[l.id]; ok && debian {
			text = "On Debian systems, the complete text of " + l.id + " can be found in\n" +
				"/usr/share/common-licenses/" + f + "."
		}
		if l.notice != "" {
			text = l.notice + "\n\n" + text
		}
		all = append(all, paragraph{{"License", withText(l.id, text)}})
	}
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
