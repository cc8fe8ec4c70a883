package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/daemon"
)

// newEventsCmd is `staticpodd events [-w] [-o json]`: what happened to pods,
// as the daemon keeps it (the newest events, in memory).
func newEventsCmd(o *globalOptions) *cobra.Command {
	var watch bool
	var output string
	cmd := &cobra.Command{
		Use:   "events [-w] [-o json]",
		Short: "Print what happened to pods: the events the running daemon keeps",
		Long: "Print the events the running daemon keeps (the newest 1000, since it started), as\n" +
			"kubectl get events shows them. -w prints them, then each new one as it happens,\n" +
			"until interrupted; an event that happens again is printed again with its count.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q: want json", output)
			}
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			out := cmd.OutOrStdout()
			if !watch {
				if output == "json" {
					body, err := c.Get(cmd.Context(), "/events")
					if err != nil {
						return err
					}
					_, err = out.Write(append(body, '\n'))
					return err
				}
				var list v1.EventList
				if err := c.GetJSON(cmd.Context(), "/events", &list); err != nil {
					return err
				}
				return printEvents(out, list.Items, time.Now())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return watchEvents(ctx, c, out, output == "json")
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the events kept, print each new one as it happens")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (with -w, one watch event per line)")
	return cmd
}

func printEvents(out io.Writer, list []v1.Event, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(out, "No events.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(describe.EventHeader, "\t"))
	for _, e := range list {
		fmt.Fprintln(tw, strings.Join(describe.EventRow(e, now), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write events: %w", err)
	}
	return nil
}

// watchEvents prints the events the daemon keeps, then each new one, until
// ctx ends or the daemon ends the watch.
func watchEvents(ctx context.Context, c *daemon.Client, out io.Writer, asJSON bool) error {
	resp, err := c.Open(ctx, "/events?watch=true")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	printed := false
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for lines.Scan() {
		if asJSON {
			if _, err := fmt.Fprintf(out, "%s\n", lines.Bytes()); err != nil {
				return err
			}
			continue
		}
		var we server.WatchEvent
		if err := json.Unmarshal(lines.Bytes(), &we); err != nil {
			return fmt.Errorf("decode event from the daemon: %w", err)
		}
		if we.Type == server.WatchError {
			var st metav1.Status
			_ = json.Unmarshal(we.Object, &st)
			return fmt.Errorf("the daemon ended the watch: %s", st.Message)
		}
		var e v1.Event
		if err := json.Unmarshal(we.Object, &e); err != nil {
			return fmt.Errorf("decode event from the daemon: %w", err)
		}
		if !printed {
			printed = true
			if err := describe.WriteWatchRow(out, describe.EventHeader); err != nil {
				return err
			}
		}
		if err := describe.WriteWatchRow(out, describe.EventRow(e, time.Now())); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("read events from the daemon: %w", err)
	}
	return fmt.Errorf("the daemon ended the watch (it stopped?)")
}
