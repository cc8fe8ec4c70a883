package rollout

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// PrintHistory writes h as `staticpodd rollout history` shows it: one
// generation a line, oldest first, numbered as kubectl numbers revisions,
// then each one's image IDs and why it failed.
func PrintHistory(out io.Writer, h History) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tUID\tSTARTED\tREADY\tFAILED\tNOTE")
	for i, g := range h.Generations {
		var notes []string
		if g.RollbackOf != "" {
			notes = append(notes, "rollback of "+g.RollbackOf)
		}
		if g.RolledBack != "" {
			notes = append(notes, "rolled back ("+g.RolledBack+")")
		}
		if h.Rejected != nil && h.Rejected.UID == g.UID {
			notes = append(notes, "its manifest is flagged until it changes")
		}
		if g.Manifest == "" {
			notes = append(notes, "manifest not kept")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, g.UID, stamp(g.StartedAt), stamp(g.ReadyAt), stamp(g.FailedAt), strings.Join(notes, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, g := range h.Generations {
		names := make([]string, 0, len(g.Images))
		for n := range g.Images {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(out, "generation %d: container %s ran %s\n", i+1, n, g.Images[n])
		}
		if g.Reason != "" {
			fmt.Fprintf(out, "generation %d: %s\n", i+1, OneLine(g.Reason))
		}
	}
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// OneLine keeps what a probe or a container wrote from breaking the table
// or passing for a line of its own, and from reaching a terminal as an
// escape sequence (C0 and C1 controls, DEL): in the table and the pod's
// RolledBack condition, which kubectl describe prints as it is.
func OneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
