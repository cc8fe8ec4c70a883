// Command copyright writes the Debian copyright file (DEP-5) of the staticpodd
// package and the rpm licence expression, from the Go modules and the C
// libraries actually linked into the shipped binaries. It fails, naming them,
// when a linked module has no licence it recognises.
//
// It is a module of its own, like packaging/nfpm, so that its licence
// classifier stays out of the daemon's go.mod. The Makefile runs it as
//
//	go -C packaging/copyright run . -root $(CURDIR) -o copyright -full copyright.full -spdx license
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The packages the Makefile builds into the .deb and .rpm, and its tags.
const (
	defaultPackages = "./cmd/staticpodd ./oci/monitor/exe"
	defaultTags     = "netgo osusergo grpcnotrace seccomp embedmonitor"
)

func main() {
	root := flag.String("root", "../..", "the staticpodd module's directory")
	out := flag.String("o", "", "write the copyright file of the .deb here, which refers to /usr/share/common-licenses (default: standard output)")
	full := flag.String("full", "", "write the copyright file with every licence's full text here (the rpm's)")
	spdx := flag.String("spdx", "", "write the package's SPDX licence expression here")
	tags := flag.String("tags", defaultTags, "the build tags of the shipped binaries")
	pkgs := flag.String("packages", defaultPackages, "the packages of the shipped binaries")
	commonLicenses := flag.String("common-licenses", "/usr/share/common-licenses", "where the full texts of the GNU licences of linked C libraries are")
	flag.Parse()

	if err := run(*root, *out, *full, *spdx, *tags, strings.Fields(*pkgs), *commonLicenses); err != nil {
		fmt.Fprintln(os.Stderr, "copyright:", err)
		os.Exit(1)
	}
}

func run(root, out, full, spdx, tags string, pkgs []string, commonLicenses string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	linked, err := listLinked(root, tags, pkgs)
	if err != nil {
		return err
	}
	doc, err := build(root, linked, commonLicenses)
	if err != nil {
		return err
	}
	if full != "" {
		var buf bytes.Buffer
		doc.write(&buf, false)
		if err := writeFile(full, buf.Bytes()); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	doc.write(&buf, true)
	if out == "" {
		_, err = os.Stdout.Write(buf.Bytes())
	} else {
		err = writeFile(out, buf.Bytes())
	}
	if err != nil {
		return err
	}
	if spdx != "" {
		return writeFile(spdx, []byte(doc.expression()+"\n"))
	}
	return nil
}

func writeFile(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
