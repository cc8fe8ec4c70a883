package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const mitText = `MIT License

Copyright (c) 2020 Jane Example

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
`

// fixture is a staticpodd root with its LICENSE and one module directory per
// entry of mods (module path -> LICENSE text; "" for none).
func fixture(t *testing.T, mods map[string]string) (string, *linked) {
	t.Helper()
	root := t.TempDir()
	own, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "LICENSE"), own, 0o644); err != nil {
		t.Fatal(err)
	}
	l := &linked{goroot: runtime.GOROOT(), goVersion: runtime.Version()}
	for path, text := range mods {
		dir := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if text != "" {
			if err := os.WriteFile(filepath.Join(dir, "LICENSE"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l.modules = append(l.modules, goModule{Path: path, Version: "v1.0.0", Dir: dir})
	}
	return root, l
}

func TestBuildNamesModulesWithoutARecognisedLicence(t *testing.T) {
	root, l := fixture(t, map[string]string{
		"example.com/known":     mitText,
		"example.com/nolicence": "",
		"example.com/ownterms":  "Copyright 2020 Someone. All rights reserved. You may not copy this.",
	})
	_, err := build(root, l, "/usr/share/common-licenses")
	var u *unrecognisedError
	if !errors.As(err, &u) {
		t.Fatalf("build: %v, want the unrecognised modules named", err)
	}
	msg := err.Error()
	for _, want := range []string{"example.com/nolicence@v1.0.0 (no licence file)", "example.com/ownterms@v1.0.0 (LICENSE)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "example.com/known") {
		t.Errorf("error names a module with a recognised licence:\n%s", msg)
	}
}

func TestBuildKeepsEachMITTextAndNamesApacheOnce(t *testing.T) {
	root, l := fixture(t, map[string]string{"example.com/known": mitText})
	d, err := build(root, l, "/usr/share/common-licenses")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	d.write(&buf, false)
	out := buf.String()
	for _, want := range []string{
		"Files: vendor/example.com/known/*\nCopyright: 2020 Jane Example\nLicense: MIT\n MIT License\n .\n Copyright (c) 2020 Jane Example\n",
		"Comment: example.com/known v1.0.0\n",
		"Files: *\nCopyright: " + ownCopyright + "\nLicense: Apache-2.0\n",
		"\nLicense: Apache-2.0\n                                  Apache License\n",
		"Files: GOROOT/src/*\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("copyright lacks %q", want)
		}
	}
	if n := strings.Count(out, "License: Apache-2.0\n "); n != 1 {
		t.Errorf("the Apache-2.0 text is in the file %d times, want once", n)
	}
	if got, want := d.expression(), "Apache-2.0 AND BSD-3-Clause AND MIT"; got != want {
		t.Errorf("expression %q, want %q", got, want)
	}
}

func TestOwnFileHeader(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"copied.go":   "// Copied from elsewhere.\n//\n" + strings.ReplaceAll("// "+strings.TrimSpace(mitText), "\n", "\n// ") + "\n\npackage x\n",
		"unknown.c":   "/*\n * Copyright 2020 Someone.\n * All rights reserved; no licence.\n */\n#include <x.h>\n",
		"ordinary.go": "// Package x does things.\npackage x\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, ok, err := ownFileParagraph(root, "copied.go")
	if err != nil || !ok || p == nil {
		t.Fatalf("copied.go: %v %v %v, want a paragraph", p, ok, err)
	}
	if ids := idsOf(p); len(ids) != 1 || ids[0] != "MIT" {
		t.Errorf("copied.go: licence %v, want MIT", ids)
	}
	if p, ok, err := ownFileParagraph(root, "unknown.c"); err != nil || !ok || p != nil {
		t.Errorf("unknown.c: %v %v %v, want it reported as unrecognised", p, ok, err)
	}
	if p, ok, err := ownFileParagraph(root, "ordinary.go"); err != nil || ok || p != nil {
		t.Errorf("ordinary.go: %v %v %v, want no paragraph", p, ok, err)
	}
}

func TestCopyrightLinesLeaveTemplatesOut(t *testing.T) {
	got := copyrightLines("Copyright 2014 The Kubernetes Authors.\n" +
		"   Copyright [yyyy] [name of copyright owner]\n" +
		"copyright notice, this list of conditions\n" +
		"Copyright (c) 2009 The Go Authors. All rights reserved.\n")
	want := []string{"2014 The Kubernetes Authors.", "2009 The Go Authors. All rights reserved."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("copyrightLines = %q, want %q", got, want)
	}
}

// A module whose one LICENSE holds an MIT notice and the Apache-2.0 text: its
// paragraph keeps the MIT notice and points to the Apache-2.0 paragraph; the
// .deb's file refers to /usr/share/common-licenses (lintian's
// copyright-file-contains-full-apache-2-license), the rpm's has the text once.
func TestApacheTextOnceAndDebianRefersToCommonLicenses(t *testing.T) {
	apache, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	root, l := fixture(t, map[string]string{"example.com/both": mitText + "\n\n" + string(apache)})
	d, err := build(root, l, "/usr/share/common-licenses")
	if err != nil {
		t.Fatal(err)
	}
	const terms = "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION"
	var deb, full bytes.Buffer
	d.write(&deb, true)
	d.write(&full, false)
	for _, want := range []string{
		"License: MIT and Apache-2.0\n MIT License\n",
		" [The text of Apache-2.0: see the License: Apache-2.0 paragraph.]\n",
		"\nLicense: Apache-2.0\n On Debian systems, the complete text of Apache-2.0 can be found in\n /usr/share/common-licenses/Apache-2.0.\n",
	} {
		if !strings.Contains(deb.String(), want) {
			t.Errorf("the .deb's copyright lacks %q", want)
		}
	}
	if strings.Contains(deb.String(), terms) {
		t.Error("the .deb's copyright repeats the Apache-2.0 text")
	}
	if n := strings.Count(full.String(), terms); n != 1 {
		t.Errorf("the rpm's copyright has the Apache-2.0 text %d times, want once", n)
	}
}
