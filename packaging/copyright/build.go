package main

import (
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

// builder gathers the paragraphs; unknown collects every part whose licence
// is not recognised, so that one run names them all.
type builder struct {
	d       *document
	texts   map[string]string // licence -> full text, for its stand-alone paragraph
	notices map[string]string // licence -> the grant printed before it (the LGPL's)
	used    map[string]bool   // licences named without their text
	unknown []string
}

func build(root string, l *linked, commonLicenses string) (*document, error) {
	ownText, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("read staticpodd's licence: %w", err)
	}
	if ids := classify(string(ownText)); len(ids) != 1 || ids[0] != ownLicence {
		return nil, fmt.Errorf("%s: recognised as %v, want %s alone", filepath.Join(root, "LICENSE"), ids, ownLicence)
	}
	b := &builder{
		d:       &document{ids: []string{ownLicence}},
		texts:   map[string]string{ownLicence: normalise(string(ownText))},
		notices: map[string]string{},
		used:    map[string]bool{ownLicence: true},
	}
	b.d.header = paragraph{
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
	b.d.files = append(b.d.files, own)

	if err := b.ownFiles(root, l.ownFiles); err != nil {
		return nil, err
	}
	if err := b.stdlib(l.goroot, l.goVersion); err != nil {
		return nil, err
	}
	for _, m := range l.modules {
		if err := b.module(m); err != nil {
			return nil, err
		}
	}
	if l.cgo {
		if err := b.cLibraries(l.pkgConfig, commonLicenses); err != nil {
			return nil, err
		}
	}
	if len(b.unknown) > 0 {
		return nil, &unrecognisedError{what: b.unknown}
	}
	for _, id := range sortedKeys(b.used) {
		if b.texts[id] == "" {
			return nil, fmt.Errorf("no text for licence %s: no linked module has it as its only licence", id)
		}
		b.d.licences = append(b.d.licences, standalone{id: id, notice: b.notices[id], text: b.texts[id]})
	}
	return b.d, nil
}

func (b *builder) add(p paragraph, ids ...string) {
	b.d.files = append(b.d.files, p)
	b.d.ids = append(b.d.ids, ids...)
}

// ownFiles adds staticpodd's files that carry another project's copyright.
func (b *builder) ownFiles(root string, files []string) error {
	for _, f := range files {
		p, ok, err := ownFileParagraph(root, f)
		switch {
		case err != nil:
			return err
		case !ok:
		case p == nil:
			b.unknown = append(b.unknown, f+" (its licence header)")
		default:
			b.add(p, idsOf(p)...)
		}
	}
	return nil
}

// stdlib adds the Go standard library and runtime.
func (b *builder) stdlib(goroot, version string) error {
	name := filepath.Join(goroot, "LICENSE")
	raw, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read the Go licence: %w", err)
	}
	ids := classify(string(raw))
	if len(ids) == 0 {
		b.unknown = append(b.unknown, "the Go standard library ("+name+")")
		return nil
	}
	text := normalise(string(raw))
	b.add(paragraph{
		{"Files", "GOROOT/src/*"},
		{"Copyright", strings.Join(orDefault(copyrightLines(text), "The Go Authors"), "\n")},
		{"License", withText(strings.Join(ids, " and "), text)},
		{"Comment", "The Go standard library and runtime of " + version + "."},
	}, ids...)
	return nil
}

// module adds one linked module. Licences with one text for every author
// are named, their text given once; any other licence file is reproduced in
// the module's paragraph, with the spans that are a canonical text pointing
// to that text's paragraph.
func (b *builder) module(m goModule) error {
	files, notices, err := moduleLicences(m.Dir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		b.unknown = append(b.unknown, m.Path+"@"+m.Version+" (no licence file)")
		return nil
	}
	var ids, texts []string
	seen := map[string]bool{}
	for _, f := range files {
		if len(f.IDs) == 0 {
			b.unknown = append(b.unknown, m.Path+"@"+m.Version+" ("+f.Name+")")
			continue
		}
		texts = append(texts, f.Text)
		for _, id := range f.IDs {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if len(f.IDs) == 1 && canonical[f.IDs[0]] && b.texts[f.IDs[0]] == "" {
			b.texts[f.IDs[0]] = f.Text
		}
	}
	if len(ids) == 0 {
		return nil
	}
	expr := strings.Join(ids, " and ")
	licence := expr
	allCanonical := true
	for _, id := range ids {
		allCanonical = allCanonical && canonical[id]
		if canonical[id] {
			b.used[id] = true
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
	b.add(paragraph{
		{"Files", "vendor/" + m.Path + "/*"},
		{"Copyright", strings.Join(orDefault(copyrightLines(append(texts, notices...)...), "The authors of "+m.Path), "\n")},
		{"License", licence},
		{"Comment", comment},
	}, ids...)
	return nil
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
