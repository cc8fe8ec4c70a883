package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// goModule is one module linked into a shipped binary.
type goModule struct {
	Path    string
	Version string // the selected version; a replacement shows as "=> path version"
	Dir     string // its files, in the module cache
}

// linked is what `go list -deps` says the shipped binaries are made of.
type linked struct {
	modules   []goModule // sorted by path, the staticpodd module left out
	goVersion string     // the toolchain whose standard library and runtime are linked
	goroot    string
	cgo       bool     // cgo links the C library (statically: -extldflags -static)
	pkgConfig []string // C libraries named by `#cgo pkg-config:` in linked packages
	ownFiles  []string // staticpodd's own linked .go and .c files, relative to root
}

type listedPackage struct {
	ImportPath   string
	Dir          string
	Standard     bool
	GoFiles      []string
	CgoFiles     []string
	CFiles       []string
	CgoPkgConfig []string
	Module       *struct {
		Path    string
		Version string
		Dir     string
		Main    bool
		Replace *struct {
			Path    string
			Version string
			Dir     string
		}
	}
	Error *struct{ Err string }
}

// listLinked runs go list as the Makefile builds: cgo on, the same tags.
func listLinked(root, tags string, pkgs []string) (*linked, error) {
	args := append([]string{"list", "-e", "-deps", "-tags", tags,
		"-json=ImportPath,Dir,Standard,GoFiles,CgoFiles,CFiles,CgoPkgConfig,Module,Error"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w: %s", strings.Join(pkgs, " "), err, stderr.Bytes())
	}
	l := &linked{}
	mods := map[string]goModule{}
	cfg := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list -deps: decode: %w", err)
		}
		// The embedded monitor is a build product go list cannot find
		// before the build; any other error is a broken build.
		if p.Error != nil && !strings.Contains(p.Error.Err, "staticpodd-monitor") {
			return nil, fmt.Errorf("go list -deps: %s: %s", p.ImportPath, p.Error.Err)
		}
		if len(p.CgoFiles) > 0 {
			l.cgo = true
		}
		for _, c := range p.CgoPkgConfig {
			if !strings.HasPrefix(c, "-") {
				cfg[c] = true
			}
		}
		switch {
		case p.Standard:
		case p.Module == nil:
			return nil, fmt.Errorf("go list -deps: %s belongs to no module", p.ImportPath)
		case p.Module.Main:
			for _, f := range append(append(append([]string{}, p.GoFiles...), p.CgoFiles...), p.CFiles...) {
				rel, err := filepath.Rel(root, filepath.Join(p.Dir, f))
				if err != nil {
					return nil, err
				}
				l.ownFiles = append(l.ownFiles, filepath.ToSlash(rel))
			}
		default:
			m := goModule{Path: p.Module.Path, Version: p.Module.Version, Dir: p.Module.Dir}
			if r := p.Module.Replace; r != nil {
				m.Version = strings.TrimSpace(p.Module.Version + " => " + r.Path + " " + r.Version)
				m.Dir = r.Dir
			}
			mods[m.Path] = m
		}
	}
	for _, m := range mods {
		l.modules = append(l.modules, m)
	}
	sort.Slice(l.modules, func(i, j int) bool { return l.modules[i].Path < l.modules[j].Path })
	for c := range cfg {
		l.pkgConfig = append(l.pkgConfig, c)
	}
	sort.Strings(l.pkgConfig)
	sort.Strings(l.ownFiles)
	env, err := exec.Command("go", "env", "GOROOT", "GOVERSION").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT GOVERSION: %w", err)
	}
	f := strings.Fields(string(env))
	if len(f) != 2 {
		return nil, fmt.Errorf("go env GOROOT GOVERSION: unexpected %q", env)
	}
	l.goroot, l.goVersion = f[0], f[1]
	return l, nil
}
