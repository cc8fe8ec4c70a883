package describe

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/status"
)

// ObjectWait is a ConfigMap or Secret a pod waits for, found in what the
// kubelet's messages say: a container's CreateContainerConfigError, the
// pod's latest FailedMount or FailedToRetrieveImagePullSecret event.
type ObjectWait struct {
	Container string   // the container that waits; "" for the pod
	Objects   []string // "secret kube-system/x", "configmap kube-system/y"
	Reason    string   // the status's or event's reason
	Message   string   // its message, which names the objects
}

// maxWaitObjects bounds the objects one wait names: the rest are counted.
const maxWaitObjects = 5

// String is the wait on one line: the objects, then why, escaped and bounded.
func (w ObjectWait) String() string {
	objs := w.Objects
	more := ""
	if len(objs) > maxWaitObjects {
		objs, more = objs[:maxWaitObjects], fmt.Sprintf(" and %d more", len(objs)-maxWaitObjects)
	}
	s := OneLine(strings.Join(objs, ", "), 400) + more + " (" + OneLine(w.Reason, 60) + ": " + OneLine(w.Message, 200) + ")"
	if w.Container != "" {
		s = Escape(w.Container) + ": " + s
	}
	return s
}

// The kubelet's words for a missing object or key: the API's NotFound
// (`secret "x" not found`, also inside FailedMount's `MountVolume.SetUp
// failed for volume "v" : ...`), makeEnvironmentVariables' missing key, and
// the volume a FailedMount is about. Compiled at first use, not at package
// init, which every re-exec of the binary runs.
var (
	notFound   = lazyRegexp(`\b(configmap|secret) "([^"\s]{1,253})" not found`)
	missingKey = lazyRegexp(`couldn't find key \S{1,253} in (ConfigMap|Secret) ([^/\s]{1,63})/(\S{1,253})`)
	mountOf    = lazyRegexp(`^MountVolume\.SetUp failed for volume "([^"]{1,63})"`)
	pullNames  = lazyRegexp(`^Unable to retrieve some image pull secrets \(([^)]+)\)`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// maxScanned bounds the text the patterns look at: messages are bounded
// already, and the names are at its start.
const maxScanned = 4 << 10

// ObjectWaits are the ConfigMaps and Secrets pod waits for: those its
// containers' CreateContainerConfigError messages name; those the
// MountVolume.SetUp failure its containers wait ContainerCreating with names
// (or those of the volume it is about), else, while it has no container yet
// (all waiting ContainerCreating without a message), its latest FailedMount
// event's; while
// a container's image pull fails, the image pull secrets its latest
// FailedToRetrieveImagePullSecret event says were not found. evs may be nil
// (the statuses' alone).
func ObjectWaits(pod v1.Pod, evs []v1.Event) []ObjectWait {
	var out []ObjectWait
	created, pulling, mounts := false, false, false
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		w := cs.State.Waiting
		if w == nil || (w.Reason != status.ContainerCreating && w.Reason != status.PodInitializing) || w.Message != "" {
			created = true
		}
		if w == nil {
			continue
		}
		switch w.Reason {
		case status.CreateContainerConfigError:
			if objs := named(pod.Namespace, w.Message); len(objs) > 0 {
				out = append(out, ObjectWait{Container: cs.Name, Objects: objs, Reason: w.Reason, Message: w.Message})
			}
		case status.ContainerCreating, status.PodInitializing:
			// The pod's volumes failed: every container says so, the pod's
			// wait is said once.
			if i := strings.Index(head(w.Message), "MountVolume.SetUp failed"); i >= 0 && !mounts {
				if ow, ok := mountWait(pod, w.Reason, w.Message[i:]); ok {
					out, mounts = append(out, ow), true
				}
			}
		case status.ErrImagePull, status.ImagePullBackOff:
			pulling = true
		}
	}
	if len(pod.Status.ContainerStatuses) == 0 {
		created = true // not reported yet: nothing to say
	}
	if e := latest(pod, evs, events.FailedMount); e != nil && !created && !mounts {
		if ow, ok := mountWait(pod, e.Reason, e.Message); ok {
			out = append(out, ow)
		}
	}
	if e := latest(pod, evs, events.FailedToRetrieveImagePullSecret); e != nil && pulling {
		if m := pullNames().FindStringSubmatch(head(e.Message)); m != nil {
			var objs []string
			for n := range strings.SplitSeq(m[1], ", ") {
				objs = append(objs, "secret "+pod.Namespace+"/"+n)
			}
			out = append(out, ObjectWait{Objects: objs, Reason: e.Reason, Message: e.Message})
		}
	}
	return out
}

// mountWait is the wait a FailedMount message says: the objects it names,
// else those of the volume it is about.
func mountWait(pod v1.Pod, reason, msg string) (ObjectWait, bool) {
	objs := named(pod.Namespace, msg)
	if len(objs) == 0 {
		if m := mountOf().FindStringSubmatch(head(msg)); m != nil {
			objs = volumeObjects(pod, m[1])
		}
	}
	return ObjectWait{Objects: objs, Reason: reason, Message: msg}, len(objs) > 0
}

// head is the part of msg the patterns look at.
func head(msg string) string {
	if len(msg) > maxScanned {
		return msg[:maxScanned]
	}
	return msg
}

// named are the objects msg says are missing, in pod namespace ns.
func named(ns, msg string) []string {
	msg = head(msg)
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, m := range notFound().FindAllStringSubmatch(msg, -1) {
		add(m[1] + " " + ns + "/" + m[2])
	}
	for _, m := range missingKey().FindAllStringSubmatch(msg, -1) {
		add(strings.ToLower(m[1]) + " " + m[2] + "/" + m[3])
	}
	return out
}

// volumeObjects are the ConfigMaps and Secrets pod's volume name is made of.
func volumeObjects(pod v1.Pod, name string) []string {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		var out []string
		switch {
		case v.ConfigMap != nil:
			out = append(out, "configmap "+pod.Namespace+"/"+v.ConfigMap.Name)
		case v.Secret != nil:
			out = append(out, "secret "+pod.Namespace+"/"+v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					out = append(out, "configmap "+pod.Namespace+"/"+s.ConfigMap.Name)
				}
				if s.Secret != nil {
					out = append(out, "secret "+pod.Namespace+"/"+s.Secret.Name)
				}
			}
		}
		return out
	}
	return nil
}

// latest is the newest event of pod (by its UID) with reason, or nil.
func latest(pod v1.Pod, evs []v1.Event, reason string) *v1.Event {
	var last *v1.Event
	for i, e := range evs {
		o := e.InvolvedObject
		if e.Reason != reason || o.Kind != "Pod" || o.Namespace != pod.Namespace || o.Name != pod.Name || o.UID != pod.UID {
			continue
		}
		if last == nil || !e.LastTimestamp.Before(&last.LastTimestamp) {
			last = &evs[i]
		}
	}
	return last
}

// PrintObjectWaits writes, under a heading, the ConfigMaps and Secrets each
// of pods waits for (ObjectWaits), one line each; nothing if none waits.
func PrintObjectWaits(out io.Writer, pods []v1.Pod, evs []v1.Event) {
	header := false
	for _, p := range pods {
		for _, w := range ObjectWaits(p, evs) {
			if !header {
				fmt.Fprint(out, "\nWaiting for ConfigMaps and Secrets:\n")
				header = true
			}
			fmt.Fprintf(out, "  %s/%s %s\n", Escape(p.Namespace), Escape(p.Name), w)
		}
	}
}
