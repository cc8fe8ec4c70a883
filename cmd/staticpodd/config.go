package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
)

// newConfigCmd is `staticpodd config`: the effective configuration for the same
// flags as run, and where each value came from.
func newConfigCmd(_ *globalOptions) *cobra.Command {
	var flags config.Flags
	var output string
	cmd := &cobra.Command{
		Use:   "config [flags as for run] [-o json]",
		Short: "Print the effective configuration and where each value came from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q: want json", output)
			}
			// --root-dir and --run-dir (o) are the root command's persistent
			// flags: Load finds them, and whether they were given, in
			// cmd.Flags(), where cobra merges them.
			cfg, warnings, err := config.Load(flags.ConfigFile, flags)
			if err != nil {
				return err
			}
			if output == "json" {
				return printConfigJSON(cmd.OutOrStdout(), cfg, warnings)
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return printConfigTable(cmd.OutOrStdout(), cfg)
		},
	}
	flags.Register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}

func printConfigTable(w io.Writer, cfg *config.Config) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tFROM\tNOTE")
	for _, e := range cfg.Entries() {
		v := e.Value
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Key, v, e.Origin, notYetActedOn[e.Key])
	}
	return tw.Flush()
}

func printConfigJSON(w io.Writer, cfg *config.Config, warnings []string) error {
	if warnings == nil {
		warnings = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	type entry struct {
		config.Entry
		Note string `json:"note,omitempty"`
	}
	var values []entry
	for _, e := range cfg.Entries() {
		values = append(values, entry{e, notYetActedOn[e.Key]})
	}
	return enc.Encode(struct {
		Values   []entry  `json:"values"`
		Warnings []string `json:"warnings"`
	}{values, warnings})
}
