package manifest

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotations the kubelet puts on static pods (pkg/kubelet/types).
const (
	AnnotationHash   = "kubernetes.io/config.hash"
	AnnotationSource = "kubernetes.io/config.source"
	AnnotationSeen   = "kubernetes.io/config.seen"
)

func typesUID(s string) types.UID { return types.UID(s) }

// FullName is the kubelet's generatePodName: <name>-<lower(node)>.
func FullName(name, nodeName string) string {
	return fmt.Sprintf("%s-%s", name, strings.ToLower(nodeName))
}

// applyStaticDefaults is the kubelet's applyDefaults (pkg/kubelet/config/common.go)
// after the UID: name, namespace, node, the config.hash and config.source
// annotations, the NoExecute toleration for file pods, phase Pending.
func applyStaticDefaults(pod *v1.Pod, source, nodeName string) {
	pod.Name = FullName(pod.Name, nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationHash] = string(pod.UID)
	pod.Annotations[AnnotationSource] = source
	if source == SourceFile || source == SourceBundle {
		addToleration(pod, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	pod.Status.Phase = v1.PodPending
}

// addToleration is helper.AddOrUpdateTolerationInPod: add t unless an equal
// toleration is there.
func addToleration(pod *v1.Pod, t v1.Toleration) {
	for _, have := range pod.Spec.Tolerations {
		if have.MatchToleration(&t) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

// SeenFunc returns when the pod with uid was first seen. The caller may persist
// the answer so that config.seen survives daemon restarts.
type SeenFunc func(uid types.UID) time.Time

// Stamp sets the kubernetes.io/config.seen annotation (RFC3339Nano, as the
// kubelet's Timestamp.GetString) from seen, or from the current time when seen is
// nil.
func Stamp(p Pod, seen SeenFunc) {
	t := time.Now()
	if seen != nil {
		t = seen(p.UID)
	}
	p.Annotations[AnnotationSeen] = t.Format(time.RFC3339Nano)
}

// Stamped is p stamped with config.seen t: p itself when it carries that
// stamp already, else a copy of p stamped (a source hands its pods to the
// agent, which shares them, so a pod once handed is never changed). A
// source that keeps what Stamped returns hands the same pod at every update
// while its manifest and its first-seen time stay, rather than a copy of
// each pod of its set at each: one copy a pod, not one an update.
func Stamped(p Pod, t time.Time) (Pod, bool) {
	v := t.Format(time.RFC3339Nano)
	if s, ok := p.Annotations[AnnotationSeen]; ok && s == v {
		return p, false
	}
	p.Pod = p.Pod.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationSeen] = v
	return p, true
}

// setAPIDefaults applies the defaults the API server gives a v1 Pod
// (pkg/apis/core/v1/defaults.go and the +default markers of k8s.io/api).
// It returns, as the API server's warnings do (pkg/api/pod/warnings.go), what
// it took differently from how it is written; base is the pod's path in a list.
func setAPIDefaults(pod *v1.Pod, base *field.Path) (warnings field.ErrorList) {
	spec := &pod.Spec
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		warnings = append(warnings, field.Invalid(base.Child("spec", "terminationGracePeriodSeconds"), *g,
			fmt.Sprintf("%d: must be >= 0; negative values are invalid and are treated as 1", *g)))
		one := int64(1)
		spec.TerminationGracePeriodSeconds = &one
	}
	if spec.TerminationGracePeriodSeconds == nil {
		d := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &d
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		b := v1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &b
	}
	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i], spec.HostNetwork)
	}
	return warnings
}

func setVolumeDefaults(v *v1.Volume) {
	s := &v.VolumeSource
	if volumeSourceCount(s) == 0 {
		s.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if s.HostPath != nil && s.HostPath.Type == nil {
		t := v1.HostPathUnset
		s.HostPath.Type = &t
	}
}

func setContainerDefaults(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = v1.PullAlways
		} else {
			c.ImagePullPolicy = v1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	// If limits are set but requests are not, requests default to limits.
	if c.Resources.Limits != nil {
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		for k, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[k]; !ok {
				c.Resources.Requests[k] = q.DeepCopy()
			}
		}
	}
	for _, rl := range []v1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for k, q := range rl {
			q.RoundUp(-3) // SetDefaults_ResourceList: milli scale
			rl[k] = q
		}
	}
	for j := range c.Ports {
		p := &c.Ports[j]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for j := range c.Env {
		if f := c.Env[j].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		setProbeDefaults(p)
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*v1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				setHTTPGetDefaults(h.HTTPGet)
			}
		}
	}
}

// setHTTPGetDefaults is SetDefaults_HTTPGetAction, for probes and hooks.
func setHTTPGetDefaults(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func setProbeDefaults(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	setHTTPGetDefaults(p.HTTPGet)
}

// imageTag returns the tag of an image reference: "latest" when it has neither
// tag nor digest, "" when it has only a digest (parsers.ParseImageName).
func imageTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	lastSlash := strings.LastIndex(name, "/")
	if i := strings.LastIndex(name, ":"); i > lastSlash {
		return name[i+1:]
	}
	if hasDigest {
		return ""
	}
	return "latest"
}

// PullAlwaysWarnings are `staticpodd validate`'s warnings for the containers
// whose image is pulled at every start because it is tagged :latest (or not
// tagged): the kubelet's default, kept, but a node without the registry (an
// imported image, an air-gapped node) cannot start them, and the daemon only
// says so once a pull has failed.
func PullAlwaysWarnings(p Pod, origin string) []Warning {
	var out []Warning
	for _, cs := range []struct {
		kind string
		list []v1.Container
	}{{"initContainers", p.Spec.InitContainers}, {"containers", p.Spec.Containers}} {
		for i, c := range cs.list {
			if c.ImagePullPolicy != v1.PullAlways || imageTag(c.Image) != "latest" {
				continue
			}
			out = append(out, Warning{Origin: origin,
				Field: field.NewPath("spec", cs.kind).Index(i).Child("imagePullPolicy").String(),
				Message: fmt.Sprintf("Always (the default for an image tagged :latest or untagged): %q is pulled at every start, "+
					"and the container does not start while its registry cannot be reached, even with the image imported; "+
					"set imagePullPolicy: IfNotPresent to use the image in the node's store", c.Image)})
		}
	}
	return out
}
