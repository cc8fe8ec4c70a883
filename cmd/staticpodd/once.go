package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/describe"
)

// defaultOnceTimeout is how long the kubelet's --runonce waited for a pod's
// containers to run: 10 retries 1s apart, the delay doubling each time
// (runonce.go: runOnceMaxRetries, runOnceRetryDelay, runOnceRetryDelayBackoff),
// 1s+2s+...+512s.
const defaultOnceTimeout = 1023 * time.Second

// printOnce writes one line per pod and per manifest problem, what run
// --once found, then why each that did not run did not.
func printOnce(out io.Writer, results []agent.OnceResult) error {
	if len(results) == 0 {
		_, err := fmt.Fprintln(out, "No pods.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tRESULT\tSTATUS\tRESTARTS")
	var why []string
	for _, r := range results {
		if r.Pod == nil {
			fmt.Fprintf(tw, "-\t%s\t%s\t-\t-\n", r.Problem.Origin, r.Outcome)
			why = append(why, r.Problem.Origin+": "+r.Message)
			continue
		}
		restarts := 0
		for _, cs := range r.Pod.Status.ContainerStatuses {
			restarts += int(cs.RestartCount)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.Pod.Namespace, r.Pod.Name, r.Outcome, podStatus(*r.Pod), restarts)
		if !r.OK() && r.Message != "" {
			why = append(why, r.Pod.Namespace+"/"+r.Pod.Name+" "+r.Message)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if len(why) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Not running:")
		for _, w := range why {
			fmt.Fprintf(out, "  %s\n", describe.OneLine(w, 2000))
		}
	}
	return nil
}
