package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/status"
	"github.com/staticpodd/staticpodd/daemon"
)

// socketName is the CLI socket under --run-dir.
const socketName = daemon.SocketName

// newPsCmd is `staticpodd ps`: pods and containers as the running daemon sees
// them, asked over <run-dir>/staticpodd.sock.
func newPsCmd(o *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ps [POD...] [-o wide|json|yaml]",
		Short: "List pods and containers as the running daemon sees them",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "wide" && output != "json" && output != "yaml" {
				return fmt.Errorf("unknown output format %q: want wide, json or yaml", output)
			}
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			var list v1.PodList
			if err := c.GetJSON(cmd.Context(), "/pods", &list); err != nil {
				return err
			}
			if len(args) > 0 {
				var err error
				if list.Items, err = describe.Select(list.Items, args); err != nil {
					return err
				}
			}
			if output == "json" || output == "yaml" {
				return describe.Encode(cmd.OutOrStdout(), &list, output)
			}
			var problems []server.Problem
			if err := c.GetJSON(cmd.Context(), "/problems", &problems); err != nil {
				return err
			}
			var probes []prober.Status
			var networks []server.PodNetwork
			var evs v1.EventList // what the pods wait for, besides their statuses
			if output == "wide" {
				if err := c.GetJSON(cmd.Context(), "/probes", &probes); err != nil {
					return err
				}
				if err := c.GetJSON(cmd.Context(), "/events", &evs); err != nil {
					return err
				}
				_ = c.GetJSON(cmd.Context(), "/networks", &networks) // none from an older daemon
				in := describe.In(list.Items)                        // ps POD...: those pods' lines only
				probes = slices.DeleteFunc(probes, func(p prober.Status) bool { return !in(p.Namespace, p.Pod) })
				networks = slices.DeleteFunc(networks, func(n server.PodNetwork) bool { return !in(n.Namespace, n.Pod) })
			}
			// Usage and node conditions; a daemon that does not measure
			// (an older one) leaves them out.
			var stats server.StatsSummary
			if err := c.GetJSON(cmd.Context(), "/stats/summary", &stats); err != nil {
				stats = server.StatsSummary{}
			}
			if err := printPods(cmd.OutOrStdout(), list.Items, problems, probes, evs.Items, &stats, output == "wide", time.Now()); err != nil || len(networks) == 0 {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), "\nPod networks:\n")
			for _, n := range networks {
				fmt.Fprintln(cmd.OutOrStdout(), "  "+describe.Escape(n.String()))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

func printPods(out io.Writer, pods []v1.Pod, problems []server.Problem, probes []prober.Status, evs []v1.Event, stats *server.StatsSummary, wide bool, now time.Time) error {
	if stats == nil {
		stats = &server.StatsSummary{}
	}
	byUID := map[string]statsapi.PodStats{}
	for _, ps := range stats.Pods {
		byUID[ps.PodRef.UID] = ps
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	if len(pods) == 0 {
		fmt.Fprintln(tw, "No pods.")
	} else {
		header := "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE"
		if wide {
			header += "\tIP\tNODE\tCPU\tMEMORY\tPIDS"
		}
		fmt.Fprintln(tw, header)
		for _, p := range pods {
			ready, restarts := 0, int32(0)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready {
					ready++
				}
				restarts += cs.RestartCount
			}
			age := "<unknown>"
			if p.Status.StartTime != nil {
				age = duration.HumanDuration(now.Sub(p.Status.StartTime.Time))
			}
			line := fmt.Sprintf("%s\t%s\t%d/%d\t%s\t%d\t%s", p.Namespace, p.Name, ready, len(p.Spec.Containers), podStatus(p), restarts, age)
			if wide {
				line += fmt.Sprintf("\t%s\t%s", orNone(p.Status.PodIP), orNone(p.Spec.NodeName))
				ps, ok := byUID[string(p.UID)]
				switch {
				case ok:
					line += fmt.Sprintf("\t%s\t%s\t%s", cpuTime(ps.CPU), workingSet(ps.Memory), count(ps.ProcessStats))
				default:
					line += "\t-\t-\t-"
				}
			}
			fmt.Fprintln(tw, line)
		}
		if wide {
			fmt.Fprintln(tw)
			fmt.Fprintln(tw, "POD\tCONTAINER\tSTATE\tRESTARTS\tPROBES\tMEMORY\tROOTFS\tLOGS\tCONTAINER ID\tIMAGE")
			for _, p := range pods {
				for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses) {
					mem, rootfs, logs := "-", "-", "-"
					for _, c := range byUID[string(p.UID)].Containers {
						if c.Name == cs.Name {
							mem, rootfs, logs = workingSet(c.Memory), used(c.Rootfs), used(c.Logs)
						}
					}
					fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, cs.Name, containerState(cs),
						cs.RestartCount, describe.ProbeSummary(probes, p, cs.Name), mem, rootfs, logs,
						orNone(strings.TrimPrefix(cs.ContainerID, "staticpodd://")), cs.Image)
				}
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write pod list: %w", err)
	}
	var pressure []string
	for _, c := range stats.Node.Conditions {
		if c.Status == v1.ConditionTrue {
			pressure = append(pressure, fmt.Sprintf("%s (since %s): %s", c.Type, duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)), c.Message))
		}
	}
	if len(pressure) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Node under pressure:")
		for _, p := range pressure {
			fmt.Fprintln(out, "  "+p)
		}
	}
	var failing []prober.Status
	for _, p := range probes {
		if p.Result != "success" {
			failing = append(failing, p)
		}
	}
	if len(failing) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Failing probes:")
		for _, p := range failing {
			fmt.Fprintf(out, "  %s/%s %s %s probe (%s ago): %s\n", p.Namespace, p.Pod, p.Container, p.Probe,
				duration.HumanDuration(now.Sub(p.At)), describe.OneLine(p.Output, 120))
		}
	}
	printDependencyWaits(out, pods)
	describe.PrintObjectWaits(out, pods, evs)
	if len(problems) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Manifest problems:")
		for _, p := range problems {
			kind := "" // an error: the manifest is not used
			if p.Warning {
				kind = "warning: " // used, not all of it
			}
			fmt.Fprintf(out, "  %s: %s%s\n", describe.Escape(p.Origin), kind, describe.Escape(p.Error))
		}
	}
	return nil
}

// printDependencyWaits says what each pod that waits for the pods it starts
// after (staticpodd.io/start-after) waits for: the STATUS column says only
// WaitingForDependency.
func printDependencyWaits(out io.Writer, pods []v1.Pod) {
	header := false
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == status.WaitingForDependency {
				if !header {
					fmt.Fprint(out, "\nWaiting for other pods:\n")
					header = true
				}
				fmt.Fprintf(out, "  %s/%s %s: %s\n", p.Namespace, p.Name, w.Reason, describe.OneLine(w.Message, 300))
				break
			}
		}
	}
}

// podStatus is the STATUS column as kubectl shows it: the reason a container
// waits or stopped, Init:n/m while init containers run, else the phase.
func podStatus(p v1.Pod) string { return status.Classify(&p).Display }

func containerState(cs v1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return "Running"
	case cs.State.Waiting != nil:
		return "Waiting:" + cs.State.Waiting.Reason
	case cs.State.Terminated != nil:
		return fmt.Sprintf("Terminated:%s(%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
	}
	return "Unknown"
}

func orNone(s string) string { return orDefault(s, "<none>") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cpuTime is the CPU time used, rounded: "1.2s", "3m4s".
func cpuTime(c *statsapi.CPUStats) string {
	if c == nil || c.UsageCoreNanoSeconds == nil {
		return "-"
	}
	d := time.Duration(*c.UsageCoreNanoSeconds)
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func workingSet(m *statsapi.MemoryStats) string {
	if m == nil || m.WorkingSetBytes == nil {
		return "-"
	}
	return bytesIEC(*m.WorkingSetBytes)
}

func used(f *statsapi.FsStats) string {
	if f == nil || f.UsedBytes == nil {
		return "-"
	}
	return bytesIEC(*f.UsedBytes)
}

func count(p *statsapi.ProcessStats) string {
	if p == nil || p.ProcessCount == nil {
		return "-"
	}
	return fmt.Sprint(*p.ProcessCount)
}

// bytesIEC is n as kubectl top shows memory: 12Mi, 3Gi, 512Ki.
func bytesIEC(n uint64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%dGi", n>>30)
	case n >= 10<<20:
		return fmt.Sprintf("%dMi", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%dKi", n>>10)
	}
	return fmt.Sprint(n)
}
