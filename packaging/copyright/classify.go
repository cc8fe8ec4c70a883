package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/licensecheck"
)

// minCoverage is how much of a licence file must be known licence text for the
// licence to count as recognised: pkg.go.dev's threshold with the same library.
const minCoverage = 75

// licenceFile is one file at a module's top level that holds its licence.
type licenceFile struct {
	Name    string
	Text    string
	IDs     []string // SPDX identifiers, in the order they appear
	Matches []licensecheck.Match
}

// unrecognisedError names the modules (or files) whose licence is unknown.
type unrecognisedError struct{ what []string }

func (e *unrecognisedError) Error() string {
	return fmt.Sprintf("no recognised licence for %d linked part(s); each needs a licence file that %s identifies:\n  %s",
		len(e.what), "github.com/google/licensecheck", strings.Join(e.what, "\n  "))
}

// classify returns the licences text is made of, or nil when less than
// minCoverage percent of it is licence text the classifier knows.
func classify(text string) []string {
	ids, _ := scan(text)
	return ids
}

// scan is classify with where in text each licence was found.
func scan(text string) ([]string, []licensecheck.Match) {
	cov := licensecheck.Scan([]byte(text))
	if cov.Percent < minCoverage {
		return nil, nil
	}
	var ids []string
	seen := map[string]bool{}
	for _, m := range cov.Match {
		if !seen[m.ID] {
			seen[m.ID] = true
			ids = append(ids, m.ID)
		}
	}
	return ids, cov.Match
}

// inlineText is a licence file as a module's paragraph reproduces it: the
// spans that are a canonical licence's text (Apache-2.0 inside a LICENSE
// that also holds a BSD and an MIT notice) point to that licence's own
// paragraph instead, so that each such text is in the file once.
func inlineText(f licenceFile) string {
	var b strings.Builder
	at := 0
	for _, m := range f.Matches {
		if !canonical[m.ID] || m.IsURL || m.Start < at {
			continue
		}
		b.WriteString(f.Text[at:m.Start])
		b.WriteString("[The text of " + m.ID + ": see the License: " + m.ID + " paragraph.]")
		at = m.End
	}
	b.WriteString(f.Text[at:])
	return normalise(b.String())
}

// isLicenceName and isNoticeName pick a module's top-level licence and
// notice files, by the names pkg.go.dev looks for.
func isLicenceName(name string) bool {
	n := strings.ToUpper(name)
	if strings.HasSuffix(n, ".GO") {
		return false // Go source (go-openapi/spec's license.go), not a licence
	}
	for _, p := range []string{"LICENSE", "LICENCE", "COPYING", "UNLICENSE", "COPYRIGHT"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func isNoticeName(name string) bool { return strings.HasPrefix(strings.ToUpper(name), "NOTICE") }

// isDocsLicence is a licence of a module's documentation (the OCI's
// LICENSE.docs, CC-BY-SA-4.0): documentation is not linked into a binary.
func isDocsLicence(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasSuffix(n, ".DOCS") || strings.HasSuffix(n, "-DOCS")
}

// moduleLicences reads and classifies the licence and notice files at the top
// of dir. A licence file the classifier does not recognise is returned with
// no IDs, so that the caller names it.
func moduleLicences(dir string) (files []licenceFile, notices []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read module directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !(isLicenceName(e.Name()) || isNoticeName(e.Name())) || isDocsLicence(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, fmt.Errorf("read licence file: %w", err)
		}
		text := normalise(string(b))
		if isNoticeName(e.Name()) {
			if text != "" {
				notices = append(notices, text)
			}
			continue
		}
		ids, matches := scan(text)
		files = append(files, licenceFile{Name: e.Name(), Text: text, IDs: ids, Matches: matches})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, notices, nil
}

// normalise makes text fit a DEP-5 field: Unix line ends, no trailing blanks,
// tabs expanded, no leading or trailing empty lines.
func normalise(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.ReplaceAll(s, "\f", "")
	s = strings.ReplaceAll(s, "\t", "    ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// copyrightLines are the "Copyright ..." lines of a licence or notice text,
// without the templates of licence texts ("Copyright [yyyy] [name of
// copyright owner]") and the clauses that speak of copyright notices.
func copyrightLines(texts ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range texts {
		for _, l := range strings.Split(t, "\n") {
			l = strings.TrimSpace(l)
			if !strings.HasPrefix(l, "Copyright ") && !strings.HasPrefix(l, "Copyright©") && !strings.HasPrefix(l, "Copyright(") {
				continue
			}
			low := strings.ToLower(l)
			if strings.Contains(low, "yyyy") || strings.Contains(low, "notice") || strings.Contains(low, "owner") ||
				strings.Contains(low, "holder") || strings.Contains(low, "license") || strings.Contains(low, "licence") {
				continue
			}
			l = strings.TrimSpace(strings.TrimPrefix(l, "Copyright"))
			for _, p := range []string{"(c)", "(C)", "©"} {
				l = strings.TrimSpace(strings.TrimPrefix(l, p))
			}
			if l != "" && !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	return out
}
