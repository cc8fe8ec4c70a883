package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	ownLicence   = "Apache-2.0"
	upstreamName = "staticpodd"
	source       = "https://github.com/staticpodd/staticpodd"
	ownCopyright = "2026 The staticpodd authors"
)

// canonical licences have one text whoever the author is, so their modules
// name them and one stand-alone paragraph holds the text. Every other
// licence (BSD, MIT, ISC…) names its authors in its text, and binary
// redistribution must reproduce that very text: it stays in the module's
// own paragraph.
var canonical = map[string]bool{
	"Apache-2.0": true, "MPL-2.0": true, "MPL-1.1": true, "CC0-1.0": true, "EPL-2.0": true,
	"GPL-2.0": true, "GPL-3.0": true, "LGPL-2.1": true, "LGPL-3.0": true, "AGPL-3.0": true,
}

// cLibrary is a C library a cgo package links; the binary is linked
// statically (-extldflags -static), so it is part of what is shipped.
type cLibrary struct {
	name, copyright, licence, textFile, comment string
	notice                                      string // the grant, which says which version(s)
}

// glibc is linked whenever cgo is; the others are found by their pkg-config
// name in `#cgo pkg-config:` lines.
var (
	glibc = cLibrary{
		name:      "glibc",
		copyright: "Free Software Foundation, Inc. and the GNU C Library contributors",
		licence:   "LGPL-2.1-or-later",
		textFile:  "LGPL-2.1",
		comment:   "The GNU C Library, linked statically (cgo, -extldflags -static).",
		notice: "The GNU C Library is free software; you can redistribute it and/or\n" +
			"modify it under the terms of the GNU Lesser General Public License as\n" +
			"published by the Free Software Foundation; either version 2.1 of the\n" +
			"License, or (at your option) any later version.",
	}
	cLibraries = map[string]cLibrary{
		"libseccomp": {
			name:      "libseccomp",
			copyright: "Paul Moore, Red Hat, and the libseccomp contributors",
			licence:   "LGPL-2.1-only",
			textFile:  "LGPL-2.1",
			comment:   "libseccomp, linked statically through github.com/seccomp/libseccomp-golang.",
			notice: "This library is free software; you can redistribute it and/or modify it\n" +
				"under the terms of version 2.1 of the GNU Lesser General Public License as\n" +
				"published by the Free Software Foundation.",
		},
	}
)

func build(root string, l *linked, commonLicenses string) (*document, error) {
	ownText, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("read staticpodd's licence: %w", err)
	}
	if ids := classify(string(ownText)); len(ids) != 1 || ids[0] != ownLicence {
		return nil, fmt.Errorf("%s: recognised as %v, want %s alone", filepath.Join(root, "LICENSE"), ids, ownLicence)
	}
	d := &document{ids: []string{ownLicence}}
	d.header = paragraph{
		{"Format", "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"},
		{"Upstream-Name", upstreamName},
		{"Upstream-Contact", source + "/issues"},
		{"Source", source},
		{"Comment", "/usr/bin/staticpodd is one static binary. Beside staticpodd's own code it\n" +
			"holds the Go modules, the Go standard library and the C libraries listed\n" +
			"below, each under its own licence. A module's paragraph names it as\n" +
			"Files: vendor/<module path>/* (the layout of `go mod vendor`) and gives its\n" +
			"version; the list is generated from `go list -deps` of the shipped binary."},
	}
	own := paragraph{{"Files", "*"}, {"Copyright", ownCopyright}, {"License", ownLicence}}
	if notice, err := os.ReadFile(filepath.Join(root, "NOTICE")); err == nil {
		own = append(own, field{"Comment", "NOTICE:\n" + normalise(string(notice))})
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("read staticpodd's notice: %w", err)
	}
	d.files = append(d.files, own)
	texts := map[string]string{ownLicence: normalise(string(ownText))}
	notices := map[string]string{}
	var unknown []string
	used := map[string]bool{ownLicence: true}

	// staticpodd's files that carry another project's copyright header.
	for _, f := range l.ownFiles {
		p, ok, err := ownFileParagraph(root, f)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if p == nil {
			unknown = append(unknown, f+" (its licence header)")
			continue
		}
		d.files = append(d.files, p)
		d.ids = append(d.ids, idsOf(p)...)
	}

	// The Go standard library and runtime.
	goLicence, err := os.ReadFile(filepath.Join(l.goroot, "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("read the Go licence: %w", err)
	}
	if ids := classify(string(goLicence)); len(ids) == 0 {
		unknown = append(unknown, "the Go standard library ("+filepath.Join(l.goroot, "LICENSE")+")")
	} else {
		text := normalise(string(goLicence))
		d.files = append(d.files, paragraph{
			{"Files", "GOROOT/src/*"},
			{"Copyright", strings.Join(orDefault(copyrightLines(text), "The Go Authors"), "\n")},
			{"License", withText(strings.Join(ids, " and "), text)},
			{"Comment", "The Go standard library and runtime of " + l.goVersion + "."},
		})
		d.ids = append(d.ids, ids...)
	}

	// Every linked module.
	for _, m := range l.modules {
		files, notices, err := moduleLicences(m.Dir)
		if err != nil {
			return nil, err
		}
		var ids []string
		seen := map[string]bool{}
		var all []string
		for _, f := range files {
			if len(f.IDs) == 0 {
				unknown = append(unknown, m.Path+"@"+m.Version+" ("+f.Name+")")
				continue
			}
			all = append(all, f.Text)
			for _, id := range f.IDs {
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
		if len(files) == 0 {
			unknown = append(unknown, m.Path+"@"+m.Version+" (no licence file)")
			continue
		}
		if len(ids) == 0 {
			continue
		}
		expr := strings.Join(ids, " and ")
		licence := expr
		allCanonical := true
		for _, id := range ids {
			allCanonical = allCanonical && canonical[id]
			if canonical[id] {
				used[id] = true
			}
		}
		for _, f := range files {
			if len(f.IDs) == 1 && canonical[f.IDs[0]] && texts[f.IDs[0]] == "" {
				texts[f.IDs[0]] = f.Text
			}
		}
		if !allCanonical {
			var inline []string
			for _, f := range files {
				if t := inlineText(f); len(f.IDs) > 0 && strings.TrimSpace(t) != "" {
					inline = append(inline, t)
				}
			}
			licence = withText(expr, strings.Join(inline, "\n\n"))
		}
		comment := m.Path + " " + m.Version
		for _, n := range notices {
			comment += "\n\nNOTICE:\n" + n
		}
		d.files = append(d.files, paragraph{
			{"Files", "vendor/" + m.Path + "/*"},
			{"Copyright", strings.Join(orDefault(copyrightLines(append(all, notices...)...), "The authors of "+m.Path), "\n")},
			{"License", licence},
			{"Comment", comment},
		})
		d.ids = append(d.ids, ids...)
	}

	// The C libraries linked statically.
	if l.cgo {
		libs := []cLibrary{glibc}
		for _, name := range l.pkgConfig {
			c, ok := cLibraries[name]
			if !ok {
				unknown = append(unknown, "C library "+name+" (pkg-config; add it to cLibraries)")
				continue
			}
			libs = append(libs, c)
		}
		for _, c := range libs {
			d.files = append(d.files, paragraph{
				{"Files", "static/" + c.name + "/*"},
				{"Copyright", c.copyright},
				{"License", c.licence},
				{"Comment", c.comment + "\nThe LGPL's terms for a work linked with the library are met by\n" +
					"staticpodd's complete source at " + source + ",\nfrom which the binary can be relinked with a modified library."},
			})
			d.ids = append(d.ids, c.licence)
			used[c.licence] = true
			notices[c.licence] = c.notice
			if texts[c.licence] == "" {
				b, err := os.ReadFile(filepath.Join(commonLicenses, c.textFile))
				if err != nil {
					return nil, fmt.Errorf("the text of %s for %s: %w", c.licence, c.name, err)
				}
				texts[c.licence] = normalise(string(b))
			}
		}
	}

	if len(unknown) > 0 {
		return nil, &unrecognisedError{what: unknown}
	}
	for _, id := range sortedKeys(used) {
		if texts[id] == "" {
			return nil, fmt.Errorf("no text for licence %s: no linked module has it as its only licence", id)
		}
		d.licences = append(d.licences, standalone{id: id, notice: notices[id], text: texts[id]})
	}
	return d, nil
}

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

func idsOf(p paragraph) []string {
	for _, f := range p {
		if f.name == "License" {
			first, _, _ := strings.Cut(f.value, "\n")
			return strings.Split(first, " and ")
		}
	}
	return nil
}

func orDefault(lines []string, def string) []string {
	if len(lines) == 0 {
		return []string{def}
	}
	return lines
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	// staticpodd's own licence first, the others in order.
	sortStrings(out)
	return out
}
