package main

import (
	"fmt"
	"os"
	"path/filepath"
)

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

// cLibraries adds glibc and the libraries named by pkg-config; the texts of
// their licences come from commonLicenses (Debian's /usr/share/common-licenses).
func (b *builder) cLibraries(pkgConfig []string, commonLicenses string) error {
	libs := []cLibrary{glibc}
	for _, name := range pkgConfig {
		c, ok := cLibraries[name]
		if !ok {
			b.unknown = append(b.unknown, "C library "+name+" (pkg-config; add it to cLibraries)")
			continue
		}
		libs = append(libs, c)
	}
	for _, c := range libs {
		b.add(paragraph{
			{"Files", "static/" + c.name + "/*"},
			{"Copyright", c.copyright},
			{"License", c.licence},
			{"Comment", c.comment + "\nThe LGPL's terms for a work linked with the library are met by\n" +
				"staticpodd's complete source at " + source + ",\nfrom which the binary can be relinked with a modified library."},
		}, c.licence)
		b.used[c.licence] = true
		b.notices[c.licence] = c.notice
		if b.texts[c.licence] == "" {
			raw, err := os.ReadFile(filepath.Join(commonLicenses, c.textFile))
			if err != nil {
				return fmt.Errorf("the text of %s for %s: %w", c.licence, c.name, err)
			}
			b.texts[c.licence] = normalise(string(raw))
		}
	}
	return nil
}
