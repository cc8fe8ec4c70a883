// Command size says what staticpodd's binary is made of: the bytes of its
// symbols summed by Go module (the standard library, C and the linker's own
// tables apart), the embedded monitor program, and the ELF sections of the
// binary as packaged.
//
//	size -bin bin/staticpodd -syms STATICPODD_WITH_SYMBOLS [-dumpdep FILE] [-top 40]
//
// -bin is the release build (stripped, as packaged); -syms the same build
// linked without -s, whose symbol table (the one `go tool nm -size` prints)
// is what is attributed. -dumpdep is what that link printed with
// -ldflags=-dumpdep: the report then says whether a function that looks
// methods up by name (reflect's Method, MethodByName: text/template's field
// evaluation) is reached, which makes the linker keep every exported method
// of every type, and from where. Symbols of the bss take no file space and are left
// out. The function tables (.gopclntab) have no per-symbol sizes: they are
// shared out by each module's share of the code, an estimate the report
// marks as such.
package main

import (
	"bufio"
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// monitorSymbol is the string the embedded monitor program is
// (oci/monitorbin_embed_linux.go): its header points at the bytes.
const monitorSymbol = "github.com/staticpodd/staticpodd/oci.monitorBinary"

func main() {
	bin := flag.String("bin", "bin/staticpodd", "the binary as packaged")
	syms := flag.String("syms", "", "the same build with its symbol table (linked without -s)")
	top := flag.Int("top", 40, "modules listed; the rest are summed")
	dumpdep := flag.String("dumpdep", "", "what the -syms link printed with -ldflags=-dumpdep")
	flag.Parse()
	err := report(*bin, *syms, *top)
	if err == nil && *dumpdep != "" {
		err = reflectMethods(*dumpdep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "size:", err)
		os.Exit(1)
	}
}

// reflectMethods reads the linker's dependency dump (lines "A -> B", each
// symbol marked <ReflectMethod> if it looks methods up by name) and prints
// each such function the program reaches with the path that first reached
// it. One is enough for the linker to keep every exported method of every
// type a value of which is converted to an interface (15 MB of this binary
// on 2026-12-05): the first found is the cause; others may follow from the
// methods it kept.
func reflectMethods(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	clean := func(s string) string {
		s, _, _ = strings.Cut(strings.TrimSpace(s), " <")
		return s
	}
	parent := map[string]string{} // the symbol that first reached each
	var found []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		a, b, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		for _, s := range []string{a, b} {
			if strings.Contains(s, "<ReflectMethod>") && !seen[clean(s)] {
				seen[clean(s)] = true
				found = append(found, clean(s))
			}
		}
		if _, ok := parent[clean(b)]; !ok {
			parent[clean(b)] = clean(a)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(parent) == 0 {
		return fmt.Errorf("%s: no dependency in it: link with -ldflags=-dumpdep, the output removed first", path)
	}
	fmt.Println()
	if len(found) == 0 {
		fmt.Println("methods looked up by name: none reached, so the linker drops every method nothing calls")
		return nil
	}
	fmt.Println("methods looked up by name: reached, so the linker keeps every exported method of every type")
	fmt.Println("(about 15 MB here). The first function found that does it, and the path that first reached it:")
	chain := []string{found[0]}
	for s := found[0]; len(chain) < 24; {
		p, ok := parent[s]
		if !ok || p == s || p == "_" {
			break
		}
		chain, s = append(chain, p), p
	}
	fmt.Printf("  %s\n", strings.Join(chain, "\n    <- "))
	if len(found) > 1 {
		fmt.Printf("and %d more, which may only follow from the methods it kept: %s\n",
			len(found)-1, strings.Join(found[1:min(len(found), 6)], ", "))
	}
	return nil
}

// row is one line of the report.
type row struct {
	name       string
	code, data int64 // .text; everything else with file space
}

func report(bin, syms string, top int) error {
	if syms == "" {
		return errors.New("need -syms: the build linked without -s")
	}
	st, err := os.Stat(bin)
	if err != nil {
		return err
	}
	packaged, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer packaged.Close()
	f, err := elf.Open(syms)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := buildinfo.ReadFile(syms)
	if err != nil {
		return err
	}
	mods := []string{info.Main.Path}
	for _, d := range info.Deps {
		mods = append(mods, d.Path)
	}
	// Longest path first, so that a nested module wins over its parent.
	slices.SortFunc(mods, func(a, b string) int { return cmp.Compare(len(b), len(a)) })

	symbols, err := f.Symbols()
	if err != nil {
		return err
	}
	byMod := map[string]*row{}
	var monitor int64
	for _, s := range symbols {
		if s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) || s.Size == 0 {
			continue
		}
		sec := f.Sections[s.Section]
		if sec.Type == elf.SHT_NOBITS {
			continue // bss: no bytes in the file
		}
		if s.Name == monitorSymbol {
			monitor = embeddedLen(f, sec, s)
		}
		m := module(s.Name, elf.ST_TYPE(s.Info), mods)
		r := byMod[m]
		if r == nil {
			r = &row{name: m}
			byMod[m] = r
		}
		if sec.Name == ".text" {
			r.code += int64(s.Size)
		} else {
			r.data += int64(s.Size)
		}
	}
	rows := make([]*row, 0, len(byMod))
	var code int64
	for _, r := range byMod {
		rows = append(rows, r)
		code += r.code
	}
	slices.SortFunc(rows, func(a, b *row) int { return cmp.Compare(b.code+b.data, a.code+a.data) })

	var pclntab int64
	if s := packaged.Section(".gopclntab"); s != nil {
		pclntab = int64(s.Size)
	}
	mb := func(n int64) string { return fmt.Sprintf("%7.2f", float64(n)/1e6) }
	fmt.Printf("binary as packaged: %s  %s MB (%d bytes)\n", bin, strings.TrimSpace(mb(st.Size())), st.Size())
	fmt.Printf("embedded monitor program: %s MB (in the go:string data of %s)\n\n",
		strings.TrimSpace(mb(monitor)), monitorSymbol)
	fmt.Println("sections of the binary as packaged (MB):")
	for _, s := range packaged.Sections {
		if s.Type != elf.SHT_NOBITS && s.Size >= 100_000 {
			fmt.Printf("  %-14s %s\n", s.Name, mb(int64(s.Size)))
		}
	}
	fmt.Printf("\nby module (MB; +pclntab: the function tables shared out by code, an estimate):\n")
	fmt.Printf("  %7s %7s %7s %9s  %s\n", "code", "data", "total", "+pclntab", "module")
	share := func(r *row) int64 {
		if code == 0 {
			return 0
		}
		return r.code * pclntab / code
	}
	var rest row
	var attributed, loaded int64
	for _, r := range rows {
		attributed += r.code + r.data
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS {
			loaded += int64(s.Size)
		}
	}
	for i, r := range rows {
		if i >= top {
			rest.code += r.code
			rest.data += r.data
			continue
		}
		fmt.Printf("  %s %s %s %s  %s\n", mb(r.code), mb(r.data), mb(r.code+r.data), "  "+mb(r.code+r.data+share(r)), r.name)
	}
	if len(rows) > top {
		rest.name = fmt.Sprintf("(%d more modules)", len(rows)-top)
		fmt.Printf("  %s %s %s %s  %s\n", mb(rest.code), mb(rest.data), mb(rest.code+rest.data), "  "+mb(rest.code+rest.data+share(&rest)), rest.name)
	}
	// What has no symbol of its own: the type descriptors and the string
	// data (the monitor's bytes among them), which the linker lays out in
	// blocks, and the ELF and Go headers.
	fmt.Printf("  %s %s %s %s  %s\n", "       ", "       ", mb(loaded-attributed-pclntab), "         ",
		"no symbol of its own: type descriptors, strings (the monitor), headers")
	return nil
}

// embeddedLen reads the length of the string symbol s of section sec.
func embeddedLen(f *elf.File, sec *elf.Section, s elf.Symbol) int64 {
	if s.Size != 16 || f.Class != elf.ELFCLASS64 {
		return 0
	}
	b := make([]byte, 16)
	if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
		return 0
	}
	return int64(f.ByteOrder.(binary.ByteOrder).Uint64(b[8:]))
}

// module names the module whose package a Go symbol belongs to, "std" for
// the standard library, "C" for what cgo links statically (libc,
// libseccomp), and "linker" for the tables the linker makes (go:func.*,
// runtime.* of the tables, type links).
func module(name string, typ elf.SymType, mods []string) string {
	pkg := packageOf(name)
	switch {
	case pkg == "":
		return "linker"
	case !strings.Contains(name, ".") && typ == elf.STT_FUNC, strings.HasPrefix(name, "_"):
		return "C"
	}
	for _, m := range mods {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	first, _, _ := strings.Cut(pkg, "/")
	if !strings.Contains(first, ".") {
		return "std"
	}
	return "other: " + pkg
}

// packageOf is the import path a Go symbol name starts with, after the
// linker's prefixes (type:, go:itab., *, ...); "" for the linker's own.
func packageOf(name string) string {
	for _, p := range []string{"type:.eq.", "type:.hash.", "type:", "go:itab.", "go:info.", "go:string.", "gclocals·"} {
		name = strings.TrimPrefix(name, p)
	}
	name = strings.TrimLeft(name, "*[]()0123456789")
	for strings.HasPrefix(name, "map[") || strings.HasPrefix(name, "chan ") || strings.HasPrefix(name, "func(") {
		i := strings.IndexAny(name, "]) ")
		if i < 0 {
			return ""
		}
		name = strings.TrimLeft(name[i+1:], "*[]() 0123456789")
	}
	if strings.HasPrefix(name, "go:") || strings.HasPrefix(name, "runtime.") && strings.Contains(name, "tab") {
		return ""
	}
	if i := strings.IndexAny(name, "[ ,"); i >= 0 {
		name = name[:i] // type arguments; an itab's interface
	}
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		dot = len(name) - slash - 1
	}
	// The linker escapes the dots of a path's last element (gopkg.in/inf.v0).
	return strings.ReplaceAll(name[:slash+1+dot], "%2e", ".")
}
