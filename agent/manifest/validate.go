package manifest

import (
	"fmt"
	"math"
	"net"
	"path"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// validate checks what the kubelet's API validation (ValidatePodCreate) and
// HasAPIObjectReference check that matters to a pod run without a cluster. Every
// failure names the field and the reason.
func validate(pod *v1.Pod, origin, prefix string) error {
	f := &fieldErrors{origin: origin}
	v := validator{f: f, prefix: prefix}
	v.meta(pod)
	v.spec(&pod.Spec)
	return f.err()
}

type validator struct {
	f      *fieldErrors
	prefix string
}

func (v validator) add(field, format string, args ...any) {
	v.f.add(v.prefix+field, format, args...)
}

func (v validator) msgs(field string, msgs []string) {
	for _, m := range msgs {
		v.add(field, "%s", m)
	}
}

func (v validator) meta(pod *v1.Pod) {
	v.msgs("metadata.name", validation.IsDNS1123Subdomain(pod.Name))
	v.msgs("metadata.namespace", validation.IsDNS1123Label(pod.Namespace))
	v.hostNames(pod)
	for k, val := range pod.Labels {
		v.msgs(fmt.Sprintf("metadata.labels[%s]", k), validation.IsQualifiedName(k))
		v.msgs(fmt.Sprintf("metadata.labels[%s]", k), validation.IsValidLabelValue(val))
	}
	for k := range pod.Annotations {
		v.msgs(fmt.Sprintf("metadata.annotations[%s]", k), validation.IsQualifiedName(strings.ToLower(k)))
	}
}

// maxFileName is NAME_MAX, the longest file name Linux filesystems take.
const maxFileName = 255

// hostNames checks what names the pod's host paths: the UID names
// <root-dir>/pods/<uid>, <run-dir>/pods/<uid> and the cgroup pod<uid>, and
// <podLogsDir>/<namespace>_<name>_<uid> is one file name. The kubelet takes a
// manifest's UID as it is and makes the log directory before the sandbox
// (kuberuntime createPodSandbox); with a name too long it fails there on every
// sync and the pod never runs. Both are refused here instead, saying why.
func (v validator) hostNames(pod *v1.Pod) {
	uid := string(pod.UID)
	if !ValidUID(uid) {
		v.add("metadata.uid", "%q: must be letters, digits, '-', '_' and '.', starting with a letter or digit: it names the pod's directories on the host", uid)
		return
	}
	if n := len(pod.Namespace) + len(pod.Name) + len(uid) + 2; n > maxFileName {
		v.add("metadata.name", "%q (the manifest's name, '-', the node name) is too long: the pod's log directory "+
			"<namespace>_<name>_<uid> would be %d bytes, and a file name may have at most %d; shorten it by %d",
			pod.Name, n, maxFileName, n-maxFileName)
	}
}

// ValidUID reports whether uid can name a directory and a cgroup by itself,
// and be matched in log directory names without a glob meaning anything.
func ValidUID(uid string) bool {
	if uid == "" {
		return false
	}
	for i, r := range uid {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case (r == '-' || r == '_' || r == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

func (v validator) spec(s *v1.PodSpec) {
	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		v.add("spec.restartPolicy", "%q: want Always, OnFailure or Never", s.RestartPolicy)
	}
	switch s.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		v.add("spec.dnsPolicy", "%q: want ClusterFirst, ClusterFirstWithHostNet, Default or None", s.DNSPolicy)
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		v.add("spec.terminationGracePeriodSeconds", "must not be negative")
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d <= 0 || *d > math.MaxInt32) {
		v.add("spec.activeDeadlineSeconds", "must be positive and at most %d", math.MaxInt32)
	}
	if s.ServiceAccountName != "" {
		v.add("spec.serviceAccountName", "static pods may not reference serviceaccounts")
	}
	if len(s.ResourceClaims) > 0 {
		v.add("spec.resourceClaims", "static pods may not use ResourceClaims")
	}
	if len(s.EphemeralContainers) > 0 {
		v.add("spec.ephemeralContainers", "not allowed in a static pod")
	}
	// Refused rather than run differently from what the manifest asks.
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace {
		v.add("spec.shareProcessNamespace", "not supported by staticpodd yet")
	}
	if sc := s.SecurityContext; sc != nil {
		v.ids("spec.securityContext", sc.RunAsUser, sc.RunAsGroup)
	}
	volumes := v.volumes(s.Volumes)
	if len(s.Containers) == 0 {
		v.add("spec.containers", "at least one container is required")
	}
	names := map[string]string{}
	for i := range s.InitContainers {
		v.container(fmt.Sprintf("spec.initContainers[%d]", i), &s.InitContainers[i], true, s.HostNetwork, volumes, names)
	}
	for i := range s.Containers {
		v.container(fmt.Sprintf("spec.containers[%d]", i), &s.Containers[i], false, s.HostNetwork, volumes, names)
	}
	for i := range s.InitContainers {
		v.lifecycle(fmt.Sprintf("spec.initContainers[%d]", i), &s.InitContainers[i], s, true)
	}
	for i := range s.Containers {
		v.lifecycle(fmt.Sprintf("spec.containers[%d]", i), &s.Containers[i], s, false)
	}
}

// lifecycle checks a container's hooks, stop signal and termination message
// as the API server's validateLifecycle and validateContainerCommon do.
func (v validator) lifecycle(field string, c *v1.Container, s *v1.PodSpec, init bool) {
	switch c.TerminationMessagePolicy {
	case v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	default:
		v.add(field+".terminationMessagePolicy", "%q: want File or FallbackToLogsOnError", c.TerminationMessagePolicy)
	}
	l := c.Lifecycle
	if l == nil {
		return
	}
	if init && c.RestartPolicy == nil {
		v.add(field+".lifecycle", "may not be set for init containers without restartPolicy=Always")
		return
	}
	v.hook(field+".lifecycle.postStart", l.PostStart, s.TerminationGracePeriodSeconds)
	v.hook(field+".lifecycle.preStop", l.PreStop, s.TerminationGracePeriodSeconds)
	if l.StopSignal != nil {
		sig := string(*l.StopSignal)
		switch {
		case s.OS == nil || s.OS.Name == "":
			v.add(field+".lifecycle.stopSignal", "may not be set for containers with empty `spec.os.name`")
		case s.OS.Name == v1.Windows:
			if sig != "SIGKILL" && sig != "SIGTERM" {
				v.add(field+".lifecycle.stopSignal", "%q: supported values: \"SIGKILL\", \"SIGTERM\"", sig)
			}
		case s.OS.Name == v1.Linux:
			if !slices.Contains(podspec.StopSignalNames, sig) {
				v.add(field+".lifecycle.stopSignal", "%q: not a supported signal (SIGTERM, SIGUSR1, SIGRTMIN+1, ...)", sig)
			}
		}
	}
}

// hook checks a postStart or preStop handler (the API server's validateHandler).
func (v validator) hook(field string, h *v1.LifecycleHandler, grace *int64) {
	if h == nil {
		return
	}
	n := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.Sleep != nil} {
		if set {
			n++
		}
	}
	if n == 0 {
		v.add(field, "must specify a handler type")
	}
	if n > 1 {
		v.add(field, "may not specify more than 1 handler type")
	}
	if e := h.Exec; e != nil && len(e.Command) == 0 {
		v.add(field+".exec.command", "required")
	}
	if g := h.HTTPGet; g != nil {
		if g.Path == "" {
			v.add(field+".httpGet.path", "required")
		}
		switch g.Port.Type {
		case intstr.Int:
			v.msgs(field+".httpGet.port", validation.IsValidPortNum(g.Port.IntValue()))
		default:
			v.msgs(field+".httpGet.port", validation.IsValidPortName(g.Port.StrVal))
		}
		if g.Scheme != v1.URISchemeHTTP && g.Scheme != v1.URISchemeHTTPS {
			v.add(field+".httpGet.scheme", "%q: want HTTP or HTTPS", g.Scheme)
		}
		for _, hd := range g.HTTPHeaders {
			v.msgs(field+".httpGet.httpHeaders", validation.IsHTTPHeaderName(hd.Name))
		}
	}
	if sl := h.Sleep; sl != nil && grace != nil && (sl.Seconds < 0 || sl.Seconds > *grace) {
		v.add(field+".sleep", "%d: must be non-negative and less than terminationGracePeriodSeconds (%d)", sl.Seconds, *grace)
	}
}

// volumeSourceCount counts the sources a volume sets; exactly one is valid.
func volumeSourceCount(s *v1.VolumeSource) int {
	n := 0
	rv := reflect.ValueOf(s).Elem()
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

var hostPathTypes = map[v1.HostPathType]bool{
	v1.HostPathUnset: true, v1.HostPathDirectoryOrCreate: true, v1.HostPathDirectory: true,
	v1.HostPathFileOrCreate: true, v1.HostPathFile: true, v1.HostPathSocket: true,
	v1.HostPathCharDev: true, v1.HostPathBlockDev: true,
}

// volumes checks the pod's volumes and returns them by name.
func (v validator) volumes(vols []v1.Volume) map[string]*v1.Volume {
	byName := map[string]*v1.Volume{}
	for i := range vols {
		vol := &vols[i]
		field := fmt.Sprintf("spec.volumes[%d]", i)
		v.msgs(field+".name", validation.IsDNS1123Label(vol.Name))
		if _, dup := byName[vol.Name]; dup {
			v.add(field+".name", "duplicate volume name %q", vol.Name)
		}
		byName[vol.Name] = vol
		if n := volumeSourceCount(&vol.VolumeSource); n > 1 {
			v.add(field, "%d volume sources set: want exactly one", n)
			continue
		}
		switch s := vol.VolumeSource; {
		case s.HostPath != nil:
			p := s.HostPath.Path
			if !path.IsAbs(p) {
				v.add(field+".hostPath.path", "%q is not an absolute path", p)
			} else if hasBacksteps(p) {
				v.add(field+".hostPath.path", "must not contain '..'")
			}
			if t := s.HostPath.Type; t != nil && !hostPathTypes[*t] {
				v.add(field+".hostPath.type", "%q is not a hostPath type", *t)
			}
		case s.EmptyDir != nil:
			switch s.EmptyDir.Medium {
			case v1.StorageMediumDefault, v1.StorageMediumMemory:
			default:
				v.add(field+".emptyDir.medium", "%q: want \"\" or Memory", s.EmptyDir.Medium)
			}
			if l := s.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
				v.add(field+".emptyDir.sizeLimit", "must not be negative")
			}
		case s.Secret != nil, s.ConfigMap != nil, s.Projected != nil, s.PersistentVolumeClaim != nil,
			s.CSI != nil, s.Ephemeral != nil, s.Image != nil:
			v.add(field, "static pods may only use hostPath and emptyDir volumes: this one needs the API server")
		default:
			v.add(field, "volume type not supported by staticpodd: use hostPath or emptyDir")
		}
	}
	return byName
}

func hasBacksteps(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

func (v validator) ids(field string, user, group *int64) {
	if user != nil && *user < 0 {
		v.add(field+".runAsUser", "must not be negative")
	}
	if group != nil && *group < 0 {
		v.add(field+".runAsGroup", "must not be negative")
	}
}

func (v validator) container(field string, c *v1.Container, init, hostNetwork bool, volumes map[string]*v1.Volume, names map[string]string) {
	v.msgs(field+".name", validation.IsDNS1123Label(c.Name))
	if prev, dup := names[c.Name]; dup && c.Name != "" {
		v.add(field+".name", "duplicate container name %q (also %s)", c.Name, prev)
	}
	names[c.Name] = field
	if strings.TrimSpace(c.Image) == "" {
		v.add(field+".image", "required")
	} else if strings.TrimSpace(c.Image) != c.Image {
		v.add(field+".image", "must not have leading or trailing whitespace")
	} else if _, err := podspec.NormalizeImage(c.Image); err != nil {
		// The kubelet accepts the pod and leaves the container waiting with
		// InvalidImageName (parsers.ParseImageName at pull time); refusing the
		// manifest says so at once, and keeps a last good pod running.
		v.add(field+".image", "%s", err)
	}
	if c.RestartPolicy != nil && (!init || *c.RestartPolicy != v1.ContainerRestartPolicyAlways) {
		v.add(field+".restartPolicy", "only Always, and only on an init container (a sidecar), is supported")
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	default:
		v.add(field+".imagePullPolicy", "%q: want Always, IfNotPresent or Never", c.ImagePullPolicy)
	}
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		v.add(field+".workingDir", "%q is not an absolute path", c.WorkingDir)
	}
	v.ports(field, c.Ports, hostNetwork)
	v.env(field, c)
	v.mounts(field, c.VolumeMounts, volumes)
	v.resources(field+".resources", &c.Resources)
	if sc := c.SecurityContext; sc != nil {
		v.ids(field+".securityContext", sc.RunAsUser, sc.RunAsGroup)
	}
	for name, p := range map[string]*v1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
		v.probe(field+"."+name, p)
	}
	if init && c.RestartPolicy == nil {
		for name, p := range map[string]*v1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
			if p != nil {
				v.add(field+"."+name, "may not be set for init containers without restartPolicy=Always")
			}
		}
	}
	// The API server's validateLivenessProbe, validateStartupProbe and
	// validateReadinessProbe.
	for name, p := range map[string]*v1.Probe{"livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe} {
		if p != nil && p.SuccessThreshold != 1 {
			v.add(field+"."+name+".successThreshold", "must be 1")
		}
	}
	if p := c.ReadinessProbe; p != nil && p.TerminationGracePeriodSeconds != nil {
		v.add(field+".readinessProbe.terminationGracePeriodSeconds", "must not be set for readinessProbes")
	}
}

func (v validator) ports(field string, ports []v1.ContainerPort, hostNetwork bool) {
	names := map[string]bool{}
	for i, p := range ports {
		pf := fmt.Sprintf("%s.ports[%d]", field, i)
		if p.Name != "" {
			v.msgs(pf+".name", validation.IsValidPortName(p.Name))
			if names[p.Name] {
				v.add(pf+".name", "duplicate port name %q", p.Name)
			}
			names[p.Name] = true
		}
		v.msgs(pf+".containerPort", validation.IsValidPortNum(int(p.ContainerPort)))
		if p.HostPort != 0 {
			v.msgs(pf+".hostPort", validation.IsValidPortNum(int(p.HostPort)))
		}
		if hostNetwork && p.HostPort != p.ContainerPort {
			v.add(pf+".hostPort", "must equal containerPort with hostNetwork")
		}
		switch p.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			v.add(pf+".protocol", "%q: want TCP, UDP or SCTP", p.Protocol)
		}
		if p.HostIP != "" {
			if net.ParseIP(p.HostIP) == nil {
				v.add(pf+".hostIP", "%q is not an IP address", p.HostIP)
			}
		}
	}
}

var fieldPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true,
	"spec.nodeName": true, "spec.serviceAccountName": true,
	"status.podIP": true, "status.podIPs": true, "status.hostIP": true, "status.hostIPs": true,
}

func (v validator) env(field string, c *v1.Container) {
	if len(c.EnvFrom) > 0 {
		v.add(field+".envFrom", "static pods may not reference configmaps or secrets")
	}
	for i, e := range c.Env {
		ef := fmt.Sprintf("%s.env[%d]", field, i)
		v.msgs(ef+".name", validation.IsEnvVarName(e.Name))
		from := e.ValueFrom
		if from == nil {
			continue
		}
		if e.Value != "" {
			v.add(ef+".valueFrom", "may not be set when value is not empty")
		}
		switch {
		case from.FieldRef != nil:
			p := from.FieldRef.FieldPath
			if !fieldPaths[p] && !strings.HasPrefix(p, "metadata.labels['") && !strings.HasPrefix(p, "metadata.annotations['") {
				v.add(ef+".valueFrom.fieldRef.fieldPath", "%q is not a supported field", p)
			}
		case from.ResourceFieldRef != nil:
			r := from.ResourceFieldRef
			if r.ContainerName != "" && r.ContainerName != c.Name {
				v.add(ef+".valueFrom.resourceFieldRef.containerName", "only this container (%s) is supported", c.Name)
			}
			switch r.Resource {
			case "limits.cpu", "limits.memory", "limits.ephemeral-storage",
				"requests.cpu", "requests.memory", "requests.ephemeral-storage":
			default:
				v.add(ef+".valueFrom.resourceFieldRef.resource", "%q is not a supported resource", r.Resource)
			}
		case from.SecretKeyRef != nil, from.ConfigMapKeyRef != nil:
			v.add(ef+".valueFrom", "static pods may not reference configmaps or secrets")
		default:
			v.add(ef+".valueFrom", "no source set")
		}
	}
}

func (v validator) mounts(field string, mounts []v1.VolumeMount, volumes map[string]*v1.Volume) {
	paths := map[string]bool{}
	for i, m := range mounts {
		mf := fmt.Sprintf("%s.volumeMounts[%d]", field, i)
		if _, ok := volumes[m.Name]; !ok {
			v.add(mf+".name", "volume %q not found in spec.volumes", m.Name)
		}
		if !path.IsAbs(m.MountPath) {
			v.add(mf+".mountPath", "%q is not an absolute path", m.MountPath)
		} else if paths[path.Clean(m.MountPath)] {
			v.add(mf+".mountPath", "%q is mounted twice", m.MountPath)
		}
		paths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" && (path.IsAbs(m.SubPath) || hasBacksteps(m.SubPath)) {
			v.add(mf+".subPath", "%q must be a relative path without '..'", m.SubPath)
		}
		switch {
		case m.SubPathExpr != "" && m.SubPath != "":
			v.add(mf+".subPathExpr", "subPathExpr and subPath are mutually exclusive")
		case m.SubPathExpr != "" && (path.IsAbs(m.SubPathExpr) || hasBacksteps(m.SubPathExpr)):
			v.add(mf+".subPathExpr", "%q must be a relative path without '..'", m.SubPathExpr)
		}
	}
}

func (v validator) resources(field string, r *v1.ResourceRequirements) {
	check := func(kind string, rl v1.ResourceList) {
		for name, q := range rl {
			if q.Sign() < 0 {
				v.add(fmt.Sprintf("%s.%s[%s]", field, kind, name), "must not be negative")
			}
			if !strings.Contains(string(name), "/") && !knownResources[name] && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				v.add(fmt.Sprintf("%s.%s[%s]", field, kind, name), "unknown resource name")
			}
		}
	}
	check("limits", r.Limits)
	check("requests", r.Requests)
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			v.add(fmt.Sprintf("%s.requests[%s]", field, name), "%s is above the limit %s", req.String(), lim.String())
		}
	}
}

var knownResources = map[v1.ResourceName]bool{
	v1.ResourceCPU: true, v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true,
}

func (v validator) probe(field string, p *v1.Probe) {
	if p == nil {
		return
	}
	n := 0
	for _, set := range []bool{p.Exec != nil, p.HTTPGet != nil, p.TCPSocket != nil, p.GRPC != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		v.add(field, "%d handlers set: want exactly one of exec, httpGet, tcpSocket, grpc", n)
	}
	for name, val := range map[string]int32{
		"initialDelaySeconds": p.InitialDelaySeconds, "timeoutSeconds": p.TimeoutSeconds,
		"periodSeconds": p.PeriodSeconds, "successThreshold": p.SuccessThreshold, "failureThreshold": p.FailureThreshold,
	} {
		if val < 0 {
			v.add(field+"."+name, "must not be negative")
		}
	}
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		v.add(field+".terminationGracePeriodSeconds", "must be greater than 0")
	}
}
