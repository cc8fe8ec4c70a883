package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// shippedTags and shippedPackages are what the Makefile builds into the .deb
// and .rpm: the daemon with GOTAGS_BUILD plus embedmonitor, and the monitor.
const shippedTags = "netgo osusergo grpcnotrace seccomp embedmonitor"

var shippedPackages = []string{"../cmd/staticpodd", "../oci/monitor/exe"}

// apache20SHA256 is the hash of the Apache License 2.0 as the ASF publishes
// it (Debian's /usr/share/common-licenses/Apache-2.0).
const apache20SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

func TestLicenceIsApache20(t *testing.T) {
	b, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != apache20SHA256 {
		t.Errorf("LICENSE is not the verbatim Apache License 2.0 (sha256 %x)", sum)
	}
}

// TestCopyrightCoversLinkedModules generates the package's DEP-5 copyright
// file as the Makefile does and holds it to `go list`: every module linked
// into the shipped binaries is there at the version `go list -m all` selects,
// with a recognised licence whose text is in the file, and so is every
// linked file of ours that carries another project's copyright.
func TestCopyrightCoversLinkedModules(t *testing.T) {
	dir := t.TempDir()
	deb, full, spdx := filepath.Join(dir, "copyright"), filepath.Join(dir, "copyright.full"), filepath.Join(dir, "license")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command("go", "-C", "../packaging/copyright", "run", ".", "-root", root, "-o", deb, "-full", full, "-spdx", spdx)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("generate the copyright file: %v\n%s", err, out)
	}
	mods, own := linkedModules(t)
	if len(mods) < 10 {
		t.Fatalf("go list -deps found %d modules; the shipped binaries link many more", len(mods))
	}
	selected := moduleGraph(t)
	for path, version := range mods {
		if selected[path] != version {
			t.Errorf("%s is linked at %s but go list -m all selects %q", path, version, selected[path])
		}
	}
	notice, err := os.ReadFile("../NOTICE")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range own {
		if !strings.Contains(string(notice), f) {
			t.Errorf("NOTICE does not name %s, which carries another project's copyright", f)
		}
	}
	for _, variant := range []string{deb, full} {
		t.Run(filepath.Base(variant), func(t *testing.T) { checkCopyrightFile(t, variant, spdx, mods, own) })
	}
	// The .deb's refers to Debian's copies of the long texts; the rpm's has them.
	const terms = "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION"
	if b, err := os.ReadFile(deb); err != nil || strings.Contains(string(b), terms) ||
		!strings.Contains(string(b), "/usr/share/common-licenses/Apache-2.0") {
		t.Errorf("the .deb's copyright must refer to /usr/share/common-licenses/Apache-2.0, not repeat it (%v)", err)
	}
	if b, err := os.ReadFile(full); err != nil || strings.Count(string(b), terms) != 1 {
		t.Errorf("the rpm's copyright must hold the Apache-2.0 text once (%v)", err)
	}
}

func checkCopyrightFile(t *testing.T, copyright, spdx string, mods map[string]string, own []string) {
	f, err := os.Open(copyright)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	paras, err := parseDEP5(f)
	if err != nil {
		t.Fatalf("%s is not DEP-5: %v", copyright, err)
	}
	for _, p := range checkCopyright(paras, mods, own) {
		t.Error(p)
	}
	expr, err := os.ReadFile(spdx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range licenceIDs(paras) {
		if !strings.Contains(" "+strings.TrimSpace(string(expr))+" ", " "+id+" ") {
			t.Errorf("the rpm licence expression %q lacks %s, which the copyright file names", expr, id)
		}
	}
	if !strings.HasPrefix(string(expr), "Apache-2.0 AND ") {
		t.Errorf("the rpm licence expression %q does not start with staticpodd's own licence", expr)
	}
}

// TestCopyrightCheckerNamesWhatIsMissing feeds the checker a file that lacks
// a linked module, names a licence without its text, has an unknown
// licence, and lacks a copied file.
func TestCopyrightCheckerNamesWhatIsMissing(t *testing.T) {
	paras := []dep5Paragraph{
		{"Format": "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/", "Upstream-Name": "staticpodd"},
		{"Files": "*", "Copyright": "2026 The staticpodd authors", "License": "Apache-2.0"},
		{"Files": "vendor/example.com/a/*", "Copyright": "2020 A", "License": "MIT\n MIT text", "Comment": "example.com/a v1.0.0"},
		{"Files": "vendor/example.com/b/*", "Copyright": "2020 B", "License": "MPL-2.0", "Comment": "example.com/b v1.2.0"},
		{"Files": "vendor/example.com/c/*", "Copyright": "2020 C", "License": "UNKNOWN\n text", "Comment": "example.com/c v1.0.0"},
		{"License": "Apache-2.0\n Apache License"},
	}
	mods := map[string]string{"example.com/a": "v1.0.0", "example.com/b": "v1.1.0", "example.com/c": "v1.0.0", "example.com/missing": "v0.1.0"}
	problems := strings.Join(checkCopyright(paras, mods, []string{"agent/copied.go"}), "\n")
	for _, want := range []string{
		"example.com/missing v0.1.0 is linked but has no paragraph",
		"example.com/b: the paragraph says v1.2.0, the binary links v1.1.0",
		"vendor/example.com/b/*: licence MPL-2.0 has no text",
		"vendor/example.com/c/*: licence \"UNKNOWN\" is not recognised",
		"agent/copied.go carries another project's copyright but has no paragraph",
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("checker did not report %q; it reported:\n%s", want, problems)
		}
	}
	if strings.Contains(problems, "example.com/a") {
		t.Errorf("checker reported the complete module example.com/a:\n%s", problems)
	}
}

// dep5Paragraph maps a field name to its value; continuation lines keep
// their leading space.
type dep5Paragraph map[string]string

// parseDEP5 reads the paragraphs of a machine-readable copyright file:
// "Name: value" fields, continuation lines starting with a space, blank
// lines between paragraphs.
func parseDEP5(r io.Reader) ([]dep5Paragraph, error) {
	var out []dep5Paragraph
	var cur dep5Paragraph
	last := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case l == "":
			cur, last = nil, ""
		case l[0] == ' ' || l[0] == '\t':
			if cur == nil || last == "" {
				return nil, errors.New("line " + strconv.Itoa(n) + ": continuation line outside a field")
			}
			if strings.TrimSpace(l) == "" {
				return nil, errors.New("line " + strconv.Itoa(n) + ": blank continuation line (write \" .\")")
			}
			cur[last] += "\n" + l
		default:
			name, value, ok := strings.Cut(l, ":")
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				return nil, errors.New("line " + strconv.Itoa(n) + ": not a field: " + l)
			}
			if cur == nil {
				cur = dep5Paragraph{}
				out = append(out, cur)
			}
			if _, dup := cur[name]; dup {
				return nil, errors.New("line " + strconv.Itoa(n) + ": field " + name + " twice in one paragraph")
			}
			cur[name], last = strings.TrimSpace(value), name
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 || out[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		return nil, errors.New("the first paragraph has no Format: of copyright-format 1.0")
	}
	return out, nil
}

// checkCopyright returns what the copyright file lacks for the linked modules
// (path -> version) and our linked files with a foreign copyright header.
func checkCopyright(paras []dep5Paragraph, mods map[string]string, own []string) []string {
	var problems []string
	texts := map[string]bool{}
	files := map[string]dep5Paragraph{}
	for _, p := range paras[1:] {
		if f, ok := p["Files"]; ok {
			files[f] = p
			for _, field := range []string{"Copyright", "License"} {
				if strings.TrimSpace(p[field]) == "" {
					problems = append(problems, f+": no "+field)
				}
			}
		} else if l, ok := p["License"]; ok {
			name, text, _ := strings.Cut(l, "\n")
			if strings.TrimSpace(text) != "" {
				texts[name] = true
			}
		}
	}
	for f, p := range files {
		expr, text, _ := strings.Cut(p["License"], "\n")
		for _, id := range splitExpression(expr) {
			if id == "" || strings.EqualFold(id, "unknown") || strings.ContainsAny(id, " \t") {
				problems = append(problems, f+": licence "+strconv.Quote(id)+" is not recognised")
			} else if strings.TrimSpace(text) == "" && !texts[id] {
				problems = append(problems, f+": licence "+id+" has no text, neither in the paragraph nor in a License paragraph")
			}
		}
	}
	for path, version := range mods {
		p, ok := files["vendor/"+path+"/*"]
		if !ok {
			problems = append(problems, path+" "+version+" is linked but has no paragraph")
			continue
		}
		if got, _, _ := strings.Cut(strings.TrimPrefix(p["Comment"], path+" "), "\n"); got != version {
			problems = append(problems, path+": the paragraph says "+got+", the binary links "+version)
		}
	}
	for _, f := range own {
		if _, ok := files[f]; !ok {
			problems = append(problems, f+" carries another project's copyright but has no paragraph")
		}
	}
	return problems
}

func splitExpression(expr string) []string {
	var ids []string
	for _, a := range strings.Split(expr, " and ") {
		ids = append(ids, strings.Split(a, " or ")...)
	}
	return ids
}

func licenceIDs(paras []dep5Paragraph) []string {
	seen := map[string]bool{}
	var ids []string
	for _, p := range paras[1:] {
		expr, _, _ := strings.Cut(p["License"], "\n")
		for _, id := range splitExpression(expr) {
			if id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// linkedModules lists, as the Makefile builds (cgo, the same tags), the
// modules in the shipped binaries and our linked files whose leading comment
// carries a copyright line (files copied from other projects).
func linkedModules(t *testing.T) (map[string]string, []string) {
	t.Helper()
	args := append([]string{"list", "-e", "-deps", "-tags", shippedTags, "-json=ImportPath,Dir,GoFiles,CgoFiles,CFiles,Module"}, shippedPackages...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mods := map[string]string{}
	var own []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                       string
			GoFiles, CgoFiles, CFiles []string
			Module                    *struct {
				Path, Version string
				Main          bool
				Replace       *struct{ Path, Version string }
			}
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Module == nil:
		case !p.Module.Main:
			// A module go.mod replaces is linked as its replacement, which
			// the copyright file names as the generator does: "v => path v".
			mods[p.Module.Path] = p.Module.Version
			if r := p.Module.Replace; r != nil {
				mods[p.Module.Path] = strings.TrimSpace(p.Module.Version + " => " + r.Path + " " + r.Version)
			}
		default:
			for _, f := range append(append(p.GoFiles, p.CgoFiles...), p.CFiles...) {
				path := filepath.Join(p.Dir, f)
				if hasCopyrightHeader(t, path) {
					rel, _ := filepath.Rel(root, path)
					own = append(own, filepath.ToSlash(rel))
				}
			}
		}
	}
	return mods, own
}

// hasCopyrightHeader: a "Copyright <year or name>" line in the comments before
// the package clause or the first C line.
func hasCopyrightHeader(t *testing.T, path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "//") && !strings.HasPrefix(l, "/*") && !strings.HasPrefix(l, "*") {
			return false
		}
		l = strings.TrimSpace(strings.TrimLeft(l, "/* "))
		if strings.HasPrefix(l, "Copyright ") && !strings.Contains(strings.ToLower(l), "notice") {
			return true
		}
	}
	return false
}

// moduleGraph is `go list -m all`: each module path and its selected version,
// with its replacement after " => " when go.mod replaces it.
func moduleGraph(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	sel := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, version, _ := strings.Cut(l, " ")
		sel[path] = strings.TrimSpace(version)
	}
	return sel
}

// TestPackagesShipTheLicences holds packaging/nfpm.yaml and the Makefile to
// shipping what the copyright generator writes: Debian's copyright file in
// the .deb, LICENSE, NOTICE and the full-text copyright as the rpm's
// %license, a maintainer Debian accepts, and the rpm License tag set from
// the generated expression.
func TestPackagesShipTheLicences(t *testing.T) {
	b, err := os.ReadFile("../packaging/nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Maintainer string `json:"maintainer"`
		Contents   []struct {
			Src      string `json:"src"`
			Dst      string `json:"dst"`
			Type     string `json:"type"`
			Packager string `json:"packager"`
		} `json:"contents"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("packaging/nfpm.yaml: %v", err)
	}
	if a, err := mail.ParseAddress(cfg.Maintainer); err != nil || strings.HasSuffix(a.Address, "@localhost") {
		t.Errorf("maintainer %q: Debian wants an RFC 822 address that reaches someone (%v)", cfg.Maintainer, err)
	}
	want := map[string]string{ // dst -> "src packager type"
		"/usr/share/doc/staticpodd/copyright":      "_output/pkg/stage/copyright deb ",
		"/usr/share/licenses/staticpodd/LICENSE":   "LICENSE  license",
		"/usr/share/licenses/staticpodd/NOTICE":    "NOTICE  license",
		"/usr/share/licenses/staticpodd/copyright": "_output/pkg/stage/copyright.full  license",
	}
	for _, c := range cfg.Contents {
		if w, ok := want[c.Dst]; ok {
			if got := c.Src + " " + c.Packager + " " + c.Type; got != w {
				t.Errorf("%s: src, packager, type %q, want %q", c.Dst, got, w)
			}
			delete(want, c.Dst)
		}
	}
	for dst := range want {
		t.Errorf("packaging/nfpm.yaml does not install %s", dst)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"$(GO) -C packaging/copyright run . -root $(CURDIR) -o $(CURDIR)/$(PKG_STAGE)/copyright",
		"-full $(CURDIR)/$(PKG_STAGE)/copyright.full -spdx $(CURDIR)/$(PKG_STAGE)/license",
		`sed "s|^license: .*|license: $$(cat $(PKG_STAGE)/license)|" packaging/nfpm.yaml > $@`,
	} {
		if !strings.Contains(string(mk), w) {
			t.Errorf("the Makefile lacks %q", w)
		}
	}
	if strings.Contains(string(mk), "--config packaging/nfpm.yaml") {
		t.Error("the Makefile builds a package from packaging/nfpm.yaml, whose license: is not the generated one")
	}
}
