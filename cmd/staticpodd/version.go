package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/oci"
)

// version is set at link time: -ldflags "-X main.version=v0.1.0".
var version = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
}

// versionText is what `version` and `--version` print: versionLine, the
// build tags, and what the build can do (oci.BuildFeatures).
func versionText() string {
	tags := "none"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-tags" && s.Value != "" {
				tags = s.Value
			}
		}
	}
	return fmt.Sprintf("%s\nbuild tags: %s\n%s", versionLine(), tags, oci.BuildFeatures().Describe())
}

// versionLine is the version, else the module's with its VCS revision, and
// the Go toolchain's.
func versionLine() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		v = info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	goVersion := ""
	if ok {
		goVersion = info.GoVersion
	}
	return fmt.Sprintf("staticpodd %s %s", v, goVersion)
}

// versionString is the version without the Go toolchain's: the link-time
// one, else the module's, else "dev".
func versionString() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
