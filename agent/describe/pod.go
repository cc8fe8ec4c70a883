package describe

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/prober"
)

// Pod writes pod as kubectl describe pod does, the parts the tables leave
// out foremost: each container's last exit (code, reason, when), its probes
// with their last results, its mounts, the pod's network, and the pod's
// events (those of its UID, oldest first); probes are the daemon's last
// results, of every pod.
func Pod(w io.Writer, pod v1.Pod, evs []v1.Event, probes []prober.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	// Every value is escaped: the API server lets control characters
	// through many of a manifest's strings (a mount path, a hostPath, a
	// probe's path), and the daemon's records hold them as given.
	line := func(indent int, key, format string, args ...any) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), key, Escape(fmt.Sprintf(format, args...)))
	}
	line(0, "Name", "%s", pod.Name)
	line(0, "Namespace", "%s", pod.Namespace)
	line(0, "UID", "%s", pod.UID)
	line(0, "Node", "%s", orNone(pod.Spec.NodeName))
	if pod.Status.StartTime != nil {
		line(0, "Start Time", "%s", pod.Status.StartTime.Time.Format(time.RFC1123Z))
	}
	if src := pod.Annotations["kubernetes.io/config.source"]; src != "" {
		line(0, "Source", "%s", src)
	}
	status := string(pod.Status.Phase)
	if pod.DeletionTimestamp != nil {
		status = "Terminating"
	}
	line(0, "Status", "%s", status)
	if pod.Status.Reason != "" {
		line(0, "Reason", "%s", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		line(0, "Message", "%s", OneLine(pod.Status.Message, 1000))
	}
	line(0, "QoS Class", "%s", orNone(string(pod.Status.QOSClass)))
	// The network: the pod's address, or the node's.
	fmt.Fprintln(tw, "Network:")
	if pod.Spec.HostNetwork {
		line(1, "Host Network", "true (the node's network)")
	} else {
		line(1, "Host Network", "false")
	}
	line(1, "IP", "%s", orNone(pod.Status.PodIP))
	var ports []string
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			s := fmt.Sprintf("%d/%s (%s)", p.ContainerPort, p.Protocol, c.Name)
			if p.HostPort != 0 {
				s = fmt.Sprintf("%s:%d->%s", orDefault(p.HostIP, "0.0.0.0"), p.HostPort, s)
			}
			ports = append(ports, s)
		}
	}
	line(1, "Ports", "%s", orNone(strings.Join(ports, ", ")))
	if len(pod.Spec.InitContainers) > 0 {
		fmt.Fprintln(tw, "Init Containers:")
		for _, c := range pod.Spec.InitContainers {
			container(tw, pod, c, pod.Status.InitContainerStatuses, probes, now)
		}
	}
	fmt.Fprintln(tw, "Containers:")
	for _, c := range pod.Spec.Containers {
		container(tw, pod, c, pod.Status.ContainerStatuses, probes, now)
	}
	// staticpodd debug's containers, while they run, as kubectl shows them.
	if len(pod.Spec.EphemeralContainers) > 0 {
		fmt.Fprintln(tw, "Ephemeral Containers:")
		for _, c := range pod.Spec.EphemeralContainers {
			container(tw, pod, v1.Container(c.EphemeralContainerCommon), pod.Status.EphemeralContainerStatuses, probes, now)
		}
	}
	if len(pod.Status.Conditions) > 0 {
		fmt.Fprintln(tw, "Conditions:")
		fmt.Fprintln(tw, "  Type\tStatus")
		for _, c := range pod.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\n", Escape(string(c.Type)), Escape(string(c.Status)))
		}
	}
	if waits := ObjectWaits(pod, evs); len(waits) > 0 {
		fmt.Fprintln(tw, "Waiting For:")
		for _, w := range waits {
			fmt.Fprintf(tw, "  %s\n", w)
		}
	}
	if len(pod.Spec.Volumes) > 0 {
		fmt.Fprintln(tw, "Volumes:")
		for _, v := range pod.Spec.Volumes {
			fmt.Fprintf(tw, "  %s:\t%s\n", Escape(v.Name), Escape(volumeSource(v)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return podEvents(w, pod, evs, now)
}

// container writes one container: state, last state, probes, mounts.
func container(tw io.Writer, pod v1.Pod, c v1.Container, statuses []v1.ContainerStatus, probes []prober.Status, now time.Time) {
	fmt.Fprintf(tw, "  %s:\n", Escape(c.Name))
	field := func(key, format string, args ...any) {
		fmt.Fprintf(tw, "    %s:\t%s\n", key, Escape(fmt.Sprintf(format, args...)))
	}
	var cs *v1.ContainerStatus
	for i := range statuses {
		if statuses[i].Name == c.Name {
			cs = &statuses[i]
		}
	}
	field("Image", "%s", c.Image)
	if cs == nil {
		field("State", "<unknown>")
	} else {
		field("Container ID", "%s", orNone(cs.ContainerID))
		field("Image ID", "%s", orNone(cs.ImageID))
		state(tw, "State", cs.State, now)
		state(tw, "Last State", cs.LastTerminationState, now)
		field("Ready", "%t", cs.Ready)
		field("Restart Count", "%d", cs.RestartCount)
	}
	for _, p := range []struct {
		kind  prober.Kind
		name  string
		probe *v1.Probe
	}{{prober.Startup, "Startup", c.StartupProbe}, {prober.Liveness, "Liveness", c.LivenessProbe}, {prober.Readiness, "Readiness", c.ReadinessProbe}} {
		if p.probe == nil {
			continue
		}
		field(p.name, "%s", probeText(p.probe))
		for _, s := range probes {
			if s.Namespace == pod.Namespace && s.Pod == pod.Name && s.Container == c.Name && s.Probe == p.kind {
				last := fmt.Sprintf("%s (%s ago)", s.Result, duration.HumanDuration(now.Sub(s.At)))
				if s.Output != "" {
					last += ": " + OneLine(s.Output, 200)
				}
				field("  Last Result", "%s", last)
			}
		}
	}
	if len(c.VolumeMounts) == 0 {
		field("Mounts", "<none>")
		return
	}
	fmt.Fprintln(tw, "    Mounts:")
	for _, m := range c.VolumeMounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		path := m.MountPath + " from " + m.Name
		if m.SubPath != "" {
			path += " (" + mode + ", path \"" + m.SubPath + "\")"
		} else {
			path += " (" + mode + ")"
		}
		fmt.Fprintf(tw, "      %s\n", Escape(path))
	}
}

// state writes a container state as kubectl describe does; the last exit's
// code and reason first of all.
func state(tw io.Writer, key string, s v1.ContainerState, now time.Time) {
	sub := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "      %s:\t%s\n", k, Escape(fmt.Sprintf(format, args...)))
	}
	switch {
	case s.Running != nil:
		fmt.Fprintf(tw, "    %s:\tRunning\n", key)
		sub("Started", "%s (%s ago)", s.Running.StartedAt.Time.Format(time.RFC1123Z), duration.HumanDuration(now.Sub(s.Running.StartedAt.Time)))
	case s.Waiting != nil:
		fmt.Fprintf(tw, "    %s:\tWaiting\n", key)
		sub("Reason", "%s", s.Waiting.Reason)
		if s.Waiting.Message != "" {
			sub("Message", "%s", OneLine(s.Waiting.Message, 500))
		}
	case s.Terminated != nil:
		t := s.Terminated
		fmt.Fprintf(tw, "    %s:\tTerminated\n", key)
		sub("Reason", "%s", orNone(t.Reason))
		if t.Message != "" {
			sub("Message", "%s", OneLine(t.Message, 500))
		}
		sub("Exit Code", "%d", t.ExitCode)
		if t.Signal != 0 {
			sub("Signal", "%d", t.Signal)
		}
		sub("Started", "%s", t.StartedAt.Time.Format(time.RFC1123Z))
		sub("Finished", "%s (%s ago)", t.FinishedAt.Time.Format(time.RFC1123Z), duration.HumanDuration(now.Sub(t.FinishedAt.Time)))
	default:
		fmt.Fprintf(tw, "    %s:\t<none>\n", key)
	}
}

// probeText is a probe as kubectl describe shows it.
func probeText(p *v1.Probe) string {
	var what string
	switch h := p.ProbeHandler; {
	case h.Exec != nil:
		what = "exec " + OneLine(fmt.Sprintf("%v", h.Exec.Command), 200)
	case h.HTTPGet != nil:
		host := h.HTTPGet.Host
		scheme := strings.ToLower(string(h.HTTPGet.Scheme))
		what = fmt.Sprintf("http-get %s://%s:%s%s", orDefault(scheme, "http"), host, port(h.HTTPGet.Port), h.HTTPGet.Path)
	case h.TCPSocket != nil:
		what = fmt.Sprintf("tcp-socket %s:%s", h.TCPSocket.Host, port(h.TCPSocket.Port))
	case h.GRPC != nil:
		what = fmt.Sprintf("grpc <pod>:%d %s", h.GRPC.Port, orDefault(ptrString(h.GRPC.Service), "<service>"))
	default:
		what = "unknown"
	}
	return fmt.Sprintf("%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d", what,
		p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
}

func port(p intstr.IntOrString) string { return p.String() }

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// volumeSource is a volume's kind and what it is made from.
func volumeSource(v v1.Volume) string {
	switch s := v.VolumeSource; {
	case s.HostPath != nil:
		t := ""
		if s.HostPath.Type != nil && *s.HostPath.Type != "" {
			t = ", type " + string(*s.HostPath.Type)
		}
		return "HostPath " + s.HostPath.Path + t
	case s.EmptyDir != nil:
		if s.EmptyDir.Medium == v1.StorageMediumMemory {
			return "EmptyDir (memory)"
		}
		return "EmptyDir"
	case s.DownwardAPI != nil:
		return "DownwardAPI"
	case s.Projected != nil:
		return "Projected"
	case s.ConfigMap != nil:
		return "ConfigMap " + s.ConfigMap.Name
	case s.Secret != nil:
		return "Secret " + s.Secret.SecretName
	}
	return "<other>"
}

// podEvents writes the events of pod (its UID, or its name before the UID
// was known), oldest first, as kubectl describe's Events table.
func podEvents(w io.Writer, pod v1.Pod, evs []v1.Event, now time.Time) error {
	var mine []v1.Event
	for _, e := range evs {
		o := e.InvolvedObject
		if o.Kind == "Pod" && o.Namespace == pod.Namespace && o.Name == pod.Name && (o.UID == "" || o.UID == pod.UID) {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		_, err := fmt.Fprintln(w, "Events:\t<none>")
		return err
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].LastTimestamp.Before(&mine[j].LastTimestamp) })
	fmt.Fprintln(w, "Events:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tContainer\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t---------\t-------")
	for _, e := range mine {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", Escape(e.Type), Escape(e.Reason), LastSeen(e, now),
			Escape(orNone(events.Container(e.InvolvedObject.FieldPath))), OneLine(e.Message, 300))
	}
	return tw.Flush()
}

func orNone(s string) string { return orDefault(s, "<none>") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ProbeSummary is "startup:ok,liveness:ok,readiness:fail" for a container's
// probes that have a result; <none> without.
func ProbeSummary(probes []prober.Status, p v1.Pod, container string) string {
	var parts []string
	for _, s := range probes {
		if s.Namespace == p.Namespace && s.Pod == p.Name && s.Container == container {
			r := "ok"
			if s.Result != "success" {
				r = "fail"
			}
			parts = append(parts, string(s.Probe)+":"+r)
		}
	}
	return orNone(strings.Join(parts, ","))
}
