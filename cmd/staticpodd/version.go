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
			goVersion, tags := "", "none"
			if ok {
				goVersion = info.GoVersion
				for _, s := range info.Settings {
					if s.Key == "-tags" && s.Value != "" {
						tags = s.Value
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "staticpodd %s %s\nbuild tags: %s\n%s", v, goVersion, tags, oci.BuildFeatures().Describe())
			return nil
		},
	}
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
