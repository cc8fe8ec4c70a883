package manifest

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// validate checks what the kubelet's API validation (ValidatePodCreate) and
// HasAPIObjectReference check that matters to a pod run without a cluster, with
// apimachinery's validation helpers where there is one. Every failure names the
// field, the value and the reason. base is the pod's path inside a list (nil
// for a pod of its own); named is false when the manifest has no name, which
// the caller reports.
func validate(pod *v1.Pod, base *field.Path, named bool) field.ErrorList {
	v := &validator{}
	v.meta(pod, base.Child("metadata"), named)
	v.spec(&pod.Spec, base.Child("spec"))
	return v.errs
}

type validator struct {
	errs field.ErrorList
	// containers are the pod's container names, init containers included
	// (a downwardAPI volume's resourceFieldRef names one).
	containers []string
}

func (v *validator) add(errs ...*field.Error) { v.errs = append(v.errs, errs...) }

// invalid adds one error per message of one of apimachinery's Is* checks.
func (v *validator) invalid(p *field.Path, value any, msgs []string) {
	for _, m := range msgs {
		v.add(field.Invalid(p, value, m))
	}
}

func (v *validator) meta(pod *v1.Pod, p *field.Path, named bool) {
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, p)
	for _, e := range errs {
		if e.Field == p.Child("name").String() && !named {
			continue // "Required value" is said already
		}
		if e.Field == p.Child("name").String() && e.Type == field.ErrorTypeInvalid {
			e.Detail += " (the name is the manifest's name, '-', the node name)"
		}
		v.add(e)
	}
	v.hostNames(pod, p)
	v.startAfter(pod, p)
	v.rollout(pod, p)
	v.followTags(pod, p)
	v.restartOnChange(pod, p)
}

// maxFileName is NAME_MAX, the longest file name Linux filesystems take.
const maxFileName = 255

// hostNames checks what names the pod's host paths: the UID names
// <root-dir>/pods/<uid>, <run-dir>/pods/<uid> and the cgroup pod<uid>, and
// <podLogsDir>/<namespace>_<name>_<uid> is one file name. The kubelet takes a
// manifest's UID as it is and makes the log directory before the sandbox
// (kuberuntime createPodSandbox); with a name too long it fails there on every
// sync and the pod never runs. Both are refused here instead, saying why.
func (v *validator) hostNames(pod *v1.Pod, p *field.Path) {
	uid := string(pod.UID)
	if !ValidUID(uid) {
		v.add(field.Invalid(p.Child("uid"), uid, "must be letters, digits, '-', '_' and '.', starting with a letter or digit: it names the pod's directories on the host"))
		return
	}
	if n := len(pod.Namespace) + len(pod.Name) + len(uid) + 2; n > maxFileName {
		v.add(field.Invalid(p.Child("name"), pod.Name, fmt.Sprintf("too long (the manifest's name, '-', the node name): the pod's log directory "+
			"<namespace>_<name>_<uid> would be %d bytes, and a file name may have at most %d; shorten it by %d",
			n, maxFileName, n-maxFileName)))
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

// maxSeconds is the longest number of seconds a time.Duration holds (292
// years): a grace period beyond it would wrap around when converted.
const maxSeconds = int64(math.MaxInt64 / time.Second)

func (v *validator) seconds(p *field.Path, s *int64, min int64) {
	if s == nil {
		return
	}
	if *s < min || *s > maxSeconds {
		v.add(field.Invalid(p, *s, fmt.Sprintf("must be from %d to %d (292 years)", min, maxSeconds)))
	}
}

func (v *validator) spec(s *v1.PodSpec, p *field.Path) {
	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		v.add(field.NotSupported(p.Child("restartPolicy"), s.RestartPolicy,
			[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	}
	switch s.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		v.add(field.NotSupported(p.Child("dnsPolicy"), s.DNSPolicy,
			[]v1.DNSPolicy{v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone}))
	}
	v.dnsConfig(s, p.Child("dnsConfig"))
	// The API server's ValidatePodSpec: the hostname goes into the pod's
	// /etc/hosts and /etc/hostname as it is.
	if s.Hostname != "" {
		v.invalid(p.Child("hostname"), s.Hostname, validation.IsDNS1123Label(s.Hostname))
	}
	if s.Subdomain != "" {
		v.invalid(p.Child("subdomain"), s.Subdomain, validation.IsDNS1123Label(s.Subdomain))
	}
	// A negative grace period was made 1 with a warning (setAPIDefaults).
	v.seconds(p.Child("terminationGracePeriodSeconds"), s.TerminationGracePeriodSeconds, 0)
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		v.add(field.Invalid(p.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if s.ServiceAccountName != "" {
		v.add(field.Forbidden(p.Child("serviceAccountName"), "static pods may not reference serviceaccounts"))
	}
	if len(s.ResourceClaims) > 0 {
		v.add(field.Forbidden(p.Child("resourceClaims"), "static pods may not use ResourceClaims"))
	}
	if len(s.EphemeralContainers) > 0 {
		v.add(field.Forbidden(p.Child("ephemeralContainers"), "not allowed in a static pod"))
	}
	// Refused rather than run differently from what the manifest asks.
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace {
		v.add(field.Forbidden(p.Child("shareProcessNamespace"), "not supported by staticpodd yet"))
	}
	if sc := s.SecurityContext; sc != nil {
		v.ids(p.Child("securityContext"), sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups)
		if g := sc.FSGroup; g != nil {
			v.invalid(p.Child("securityContext", "fsGroup"), *g, validation.IsValidGroupID(*g))
		}
	}
	v.podSecurity(s, p.Child("securityContext"))
	for _, c := range s.InitContainers {
		v.containers = append(v.containers, c.Name)
	}
	for _, c := range s.Containers {
		v.containers = append(v.containers, c.Name)
	}
	volumes := v.volumes(s.Volumes, p.Child("volumes"))
	if len(s.Containers) == 0 {
		v.add(field.Required(p.Child("containers"), "at least one container is required"))
	}
	names := map[string]string{}
	for i := range s.InitContainers {
		v.container(p.Child("initContainers").Index(i), &s.InitContainers[i], true, s.HostNetwork, volumes, names)
	}
	for i := range s.Containers {
		v.container(p.Child("containers").Index(i), &s.Containers[i], false, s.HostNetwork, volumes, names)
	}
	v.uniqueHostPorts(p.Child("containers"), s.Containers)
	for i := range s.InitContainers {
		v.lifecycle(p.Child("initContainers").Index(i), &s.InitContainers[i], s, true)
	}
	for i := range s.Containers {
		v.lifecycle(p.Child("containers").Index(i), &s.Containers[i], s, false)
	}
}

// lifecycle checks a container's hooks, stop signal and termination message
// as the API server's validateLifecycle and validateContainerCommon do.
func (v *validator) lifecycle(p *field.Path, c *v1.Container, s *v1.PodSpec, init bool) {
	switch c.TerminationMessagePolicy {
	case v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	default:
		v.add(field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]string{string(v1.TerminationMessageReadFile), string(v1.TerminationMessageFallbackToLogsOnError)}))
	}
	l := c.Lifecycle
	if l == nil {
		return
	}
	lp := p.Child("lifecycle")
	if init && !isSidecar(c) {
		v.add(field.Forbidden(lp, "may not be set for init containers without restartPolicy=Always"))
		return
	}
	v.hook(lp.Child("postStart"), l.PostStart, s.TerminationGracePeriodSeconds)
	v.hook(lp.Child("preStop"), l.PreStop, s.TerminationGracePeriodSeconds)
	if l.StopSignal != nil {
		sig := string(*l.StopSignal)
		sp := lp.Child("stopSignal")
		switch {
		case s.OS == nil || s.OS.Name == "":
			v.add(field.Forbidden(sp, "may not be set for containers with empty `spec.os.name`"))
		case s.OS.Name == v1.Windows:
			if sig != "SIGKILL" && sig != "SIGTERM" {
				v.add(field.NotSupported(sp, sig, []string{"SIGKILL", "SIGTERM"}))
			}
		case s.OS.Name == v1.Linux:
			if !slices.Contains(podspec.StopSignalNames, sig) {
				v.add(field.Invalid(sp, sig, "not a supported signal (SIGTERM, SIGUSR1, SIGRTMIN+1, ...)"))
			}
		}
	}
}

// hook checks a postStart or preStop handler (the API server's validateHandler).
func (v *validator) hook(p *field.Path, h *v1.LifecycleHandler, grace *int64) {
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
		v.add(field.Required(p, "must specify a handler type"))
	}
	if n > 1 {
		v.add(field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	if e := h.Exec; e != nil && len(e.Command) == 0 {
		v.add(field.Required(p.Child("exec", "command"), ""))
	}
	if g := h.HTTPGet; g != nil {
		gp := p.Child("httpGet")
		if g.Path == "" {
			v.add(field.Required(gp.Child("path"), ""))
		}
		switch g.Port.Type {
		case intstr.Int:
			v.invalid(gp.Child("port"), g.Port.IntValue(), validation.IsValidPortNum(g.Port.IntValue()))
		default:
			v.invalid(gp.Child("port"), g.Port.StrVal, validation.IsValidPortName(g.Port.StrVal))
		}
		if g.Scheme != v1.URISchemeHTTP && g.Scheme != v1.URISchemeHTTPS {
			v.add(field.NotSupported(gp.Child("scheme"), g.Scheme, []string{string(v1.URISchemeHTTP), string(v1.URISchemeHTTPS)}))
		}
		for i, hd := range g.HTTPHeaders {
			v.invalid(gp.Child("httpHeaders").Index(i).Child("name"), hd.Name, validation.IsHTTPHeaderName(hd.Name))
		}
	}
	if sl := h.Sleep; sl != nil && grace != nil && (sl.Seconds < 0 || sl.Seconds > *grace) {
		v.add(field.Invalid(p.Child("sleep", "seconds"), sl.Seconds,
			fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace)))
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

var hostPathTypes = []v1.HostPathType{
	v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory,
	v1.HostPathFileOrCreate, v1.HostPathFile, v1.HostPathSocket,
	v1.HostPathCharDev, v1.HostPathBlockDev,
}

// volumes checks the pod's volumes and returns them by name.
func (v *validator) volumes(vols []v1.Volume, p *field.Path) map[string]*v1.Volume {
	byName := map[string]*v1.Volume{}
	for i := range vols {
		vol := &vols[i]
		vp := p.Index(i)
		v.invalid(vp.Child("name"), vol.Name, validation.IsDNS1123Label(vol.Name))
		if _, dup := byName[vol.Name]; dup {
			v.add(field.Duplicate(vp.Child("name"), vol.Name))
		}
		byName[vol.Name] = vol
		if n := volumeSourceCount(&vol.VolumeSource); n > 1 {
			v.add(field.Forbidden(vp, fmt.Sprintf("%d volume sources set: may not specify more than 1 volume type", n)))
			continue
		}
		switch s := vol.VolumeSource; {
		case s.HostPath != nil:
			hp := vp.Child("hostPath")
			v.absolute(hp.Child("path"), s.HostPath.Path)
			if t := s.HostPath.Type; t != nil && !contains(hostPathTypes, *t) {
				v.add(field.NotSupported(hp.Child("type"), *t, hostPathTypes))
			}
		case s.EmptyDir != nil:
			switch s.EmptyDir.Medium {
			case v1.StorageMediumDefault, v1.StorageMediumMemory:
			default:
				v.add(field.NotSupported(vp.Child("emptyDir", "medium"), s.EmptyDir.Medium,
					[]v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory}))
			}
			if l := s.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
				v.add(field.Invalid(vp.Child("emptyDir", "sizeLimit"), l.String(), "must not be negative"))
			}
		case s.DownwardAPI != nil:
			v.downwardAPI(vp.Child("downwardAPI"), s.DownwardAPI)
		case s.ConfigMap != nil:
			cp := vp.Child("configMap")
			if s.ConfigMap.Name == "" {
				v.add(field.Required(cp.Child("name"), ""))
			}
			v.mode(cp.Child("defaultMode"), s.ConfigMap.DefaultMode)
			v.keyToPaths(cp.Child("items"), s.ConfigMap.Items, nil)
		case s.Secret != nil:
			sp := vp.Child("secret")
			if s.Secret.SecretName == "" {
				v.add(field.Required(sp.Child("secretName"), ""))
			}
			v.mode(sp.Child("defaultMode"), s.Secret.DefaultMode)
			v.keyToPaths(sp.Child("items"), s.Secret.Items, nil)
		case s.Projected != nil:
			v.projected(vp.Child("projected"), s.Projected)
		case s.PersistentVolumeClaim != nil, s.CSI != nil, s.Ephemeral != nil, s.Image != nil:
			v.add(field.Forbidden(vp, "static pods may only use hostPath, emptyDir, downwardAPI, configMap, secret and projected volumes: this one needs the API server"))
		default:
			v.add(field.Forbidden(vp, "volume type not supported by staticpodd: use hostPath, emptyDir, downwardAPI, configMap, secret or projected"))
		}
	}
	return byName
}

func contains[T comparable](list []T, x T) bool {
	for _, e := range list {
		if e == x {
			return true
		}
	}
	return false
}

// absolute wants an absolute path without '..' (the API's
// validatePathNoBacksteps, which apimachinery does not have).
func (v *validator) absolute(p *field.Path, s string) {
	switch {
	case !path.IsAbs(s):
		v.add(field.Invalid(p, s, "must be an absolute path"))
	case hasBacksteps(s):
		v.add(field.Invalid(p, s, "must not contain '..'"))
	}
}

// relative wants a relative path without '..' (the API's validateLocalDescendingPath).
func (v *validator) relative(p *field.Path, s string) {
	if path.IsAbs(s) || hasBacksteps(s) {
		v.add(field.Invalid(p, s, "must be a relative path without '..'"))
	}
}

func hasBacksteps(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// ids checks user and group IDs as the API does (IsValidUserID,
// IsValidGroupID: 0 to 2147483647); larger ones would wrap when handed to
// the kernel as 32-bit IDs.
func (v *validator) ids(p *field.Path, user, group *int64, groups []int64) {
	if user != nil {
		v.invalid(p.Child("runAsUser"), *user, validation.IsValidUserID(*user))
	}
	if group != nil {
		v.invalid(p.Child("runAsGroup"), *group, validation.IsValidGroupID(*group))
	}
	for i, g := range groups {
		v.invalid(p.Child("supplementalGroups").Index(i), g, validation.IsValidGroupID(g))
	}
}

func (v *validator) container(p *field.Path, c *v1.Container, init, hostNetwork bool, volumes map[string]*v1.Volume, names map[string]string) {
	v.invalid(p.Child("name"), c.Name, validation.IsDNS1123Label(c.Name))
	if prev, dup := names[c.Name]; dup && c.Name != "" {
		e := field.Duplicate(p.Child("name"), c.Name)
		e.Detail = "also " + prev
		v.add(e)
	}
	names[c.Name] = p.String()
	switch img := c.Image; {
	case strings.TrimSpace(img) == "":
		v.add(field.Required(p.Child("image"), ""))
	case strings.TrimSpace(img) != img:
		v.add(field.Invalid(p.Child("image"), img, "must not have leading or trailing whitespace"))
	default:
		// The kubelet accepts the pod and leaves the container waiting with
		// InvalidImageName (parsers.ParseImageName at pull time); refusing the
		// manifest says so at once, and keeps a last good pod running.
		if _, err := podspec.NormalizeImage(img); err != nil {
			msg := err.Error()
			if re, ok := errors.AsType[*podspec.RefError](err); ok {
				msg = re.Reason()
			}
			v.add(field.Invalid(p.Child("image"), img, "not an image reference: "+msg))
		}
	}
	v.restartPolicy(p, c.RestartPolicy, c.RestartPolicyRules)
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	default:
		v.add(field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
	}
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		v.add(field.Invalid(p.Child("workingDir"), c.WorkingDir, "must be an absolute path"))
	}
	v.ports(p.Child("ports"), c.Ports, hostNetwork)
	v.env(p, c, volumes)
	v.mounts(p.Child("volumeMounts"), c.VolumeMounts, volumes)
	for i, m := range c.VolumeMounts {
		v.mountPropagation(p.Child("volumeMounts").Index(i).Child("mountPropagation"), m.MountPropagation, c)
	}
	v.resources(p.Child("resources"), &c.Resources)
	if sc := c.SecurityContext; sc != nil {
		v.ids(p.Child("securityContext"), sc.RunAsUser, sc.RunAsGroup, nil)
	}
	v.containerSecurity(c.SecurityContext, p.Child("securityContext"))
	probes := []struct {
		name string
		p    *v1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
	for _, pr := range probes {
		if pr.p == nil {
			continue
		}
		pp := p.Child(pr.name)
		v.probe(pp, pr.p)
		if init && !isSidecar(c) {
			v.add(field.Forbidden(pp, "may not be set for init containers without restartPolicy=Always"))
		}
		// The API server's validateLivenessProbe, validateStartupProbe and
		// validateReadinessProbe.
		if pr.name != "readinessProbe" && pr.p.SuccessThreshold != 1 {
			v.add(field.Invalid(pp.Child("successThreshold"), pr.p.SuccessThreshold, "must be 1"))
		}
		if pr.name == "readinessProbe" && pr.p.TerminationGracePeriodSeconds != nil {
			v.add(field.Invalid(pp.Child("terminationGracePeriodSeconds"), *pr.p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
}

var protocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

// uniqueHostPorts is the API server's AccumulateUniqueHostPorts: one
// hostPort, protocol and hostIP at most once in the pod's containers.
func (v *validator) uniqueHostPorts(p *field.Path, containers []v1.Container) {
	seen := map[string]bool{}
	for i, c := range containers {
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			proto := port.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			key := fmt.Sprintf("%d/%s", port.HostPort, proto)
			if port.HostIP != "" {
				key = port.HostIP + ":" + key
			}
			if seen[key] {
				v.add(field.Duplicate(p.Index(i).Child("ports").Index(j).Child("hostPort"), key))
			}
			seen[key] = true
		}
	}
}

func (v *validator) ports(p *field.Path, ports []v1.ContainerPort, hostNetwork bool) {
	names := map[string]bool{}
	for i, port := range ports {
		pp := p.Index(i)
		if port.Name != "" {
			v.invalid(pp.Child("name"), port.Name, validation.IsValidPortName(port.Name))
			if names[port.Name] {
				v.add(field.Duplicate(pp.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		v.invalid(pp.Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))
		if port.HostPort != 0 {
			v.invalid(pp.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			v.add(field.Invalid(pp.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		if !contains(protocols, port.Protocol) {
			v.add(field.NotSupported(pp.Child("protocol"), port.Protocol, protocols))
		}
		if port.HostIP != "" {
			v.add(validation.IsValidIP(pp.Child("hostIP"), port.HostIP)...)
		}
	}
}

var fieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid",
	"spec.nodeName", "spec.serviceAccountName",
	"status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs",
}

var resourceFields = []string{
	"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage",
}

func (v *validator) env(p *field.Path, c *v1.Container, volumes map[string]*v1.Volume) {
	v.envFrom(p.Child("envFrom"), c.EnvFrom)
	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		v.invalid(ep.Child("name"), e.Name, validation.IsEnvVarName(e.Name))
		from := e.ValueFrom
		if from == nil {
			continue
		}
		fp := ep.Child("valueFrom")
		if e.Value != "" {
			v.add(field.Invalid(fp, "", "may not be specified when `value` is not empty"))
		}
		switch {
		case from.FieldRef != nil:
			fieldPath := from.FieldRef.FieldPath
			if !contains(fieldPaths, fieldPath) && !strings.HasPrefix(fieldPath, "metadata.labels['") && !strings.HasPrefix(fieldPath, "metadata.annotations['") {
				v.add(field.NotSupported(fp.Child("fieldRef", "fieldPath"), fieldPath, fieldPaths))
			}
		case from.ResourceFieldRef != nil:
			r := from.ResourceFieldRef
			if r.ContainerName != "" && r.ContainerName != c.Name {
				v.add(field.Invalid(fp.Child("resourceFieldRef", "containerName"), r.ContainerName, "only this container ("+c.Name+") is supported"))
			}
			if !contains(resourceFields, r.Resource) {
				v.add(field.NotSupported(fp.Child("resourceFieldRef", "resource"), r.Resource, resourceFields))
			}
		case from.FileKeyRef != nil:
			v.fileKeyRef(fp.Child("fileKeyRef"), from.FileKeyRef, volumes)
		case from.ConfigMapKeyRef != nil:
			v.keySelector(fp.Child("configMapKeyRef"), from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key)
		case from.SecretKeyRef != nil:
			v.keySelector(fp.Child("secretKeyRef"), from.SecretKeyRef.Name, from.SecretKeyRef.Key)
		default:
			v.add(field.Invalid(fp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
		}
	}
}

// fileKeyRef checks a variable read from a file as the API does
// (validateFileKeySelector, validateFileKeyRefVolumes): a key that is an
// environment variable name, the name of an emptyDir of the pod, a path
// without "..".
func (v *validator) fileKeyRef(p *field.Path, f *v1.FileKeySelector, volumes map[string]*v1.Volume) {
	if f.Key == "" {
		v.add(field.Required(p.Child("key"), ""))
	} else {
		v.invalid(p.Child("key"), f.Key, validation.IsRelaxedEnvVarName(f.Key))
	}
	switch vol := volumes[f.VolumeName]; {
	case f.VolumeName == "":
		v.add(field.Required(p.Child("volumeName"), ""))
	case vol == nil:
		v.add(field.NotFound(p.Child("volumeName"), f.VolumeName))
	case vol.EmptyDir == nil:
		v.add(field.Invalid(p.Child("volumeName"), f.VolumeName, "referenced volume must be of type emptyDir"))
	}
	if f.Path == "" {
		v.add(field.Required(p.Child("path"), ""))
	} else if hasBacksteps(f.Path) {
		v.add(field.Invalid(p.Child("path"), f.Path, "must not contain '..'"))
	}
}

func (v *validator) mounts(p *field.Path, mounts []v1.VolumeMount, volumes map[string]*v1.Volume) {
	paths := map[string]bool{}
	for i, m := range mounts {
		mp := p.Index(i)
		if _, ok := volumes[m.Name]; !ok {
			v.add(field.NotFound(mp.Child("name"), m.Name))
		}
		if !path.IsAbs(m.MountPath) {
			v.add(field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		} else if paths[path.Clean(m.MountPath)] {
			v.add(field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" {
			v.relative(mp.Child("subPath"), m.SubPath)
		}
		mountRecursiveReadOnly(v, mp, m)
		switch {
		case m.SubPathExpr != "" && m.SubPath != "":
			v.add(field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		case m.SubPathExpr != "":
			v.relative(mp.Child("subPathExpr"), m.SubPathExpr)
		}
	}
}

func (v *validator) resources(p *field.Path, r *v1.ResourceRequirements) {
	for _, kind := range []struct {
		name string
		list v1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for name, q := range kind.list {
			rp := p.Child(kind.name).Key(string(name))
			if lim, ok := r.Limits[name]; ok && kind.name == "requests" && q.Cmp(lim) == 0 {
				continue // defaulted from the limit, or the same: said of the limit
			}
			if q.Sign() < 0 {
				v.add(field.Invalid(rp, q.String(), "must be greater than or equal to 0"))
			}
			if most := largestQuantity(name); q.Cmp(most) > 0 {
				// The kubelet converts it with Value or MilliValue, which
				// wrap: 1e1000000 bytes of memory is a limit of 0.
				v.add(field.Invalid(rp, q.String(), "must be at most "+most.String()+": a larger value does not fit the cgroup setting"))
			}
			switch {
			case knownResources[name], strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
			case strings.Contains(string(name), "/"):
				v.invalid(rp, string(name), validation.IsQualifiedName(string(name)))
			default:
				v.add(field.Invalid(rp, string(name), "unknown resource name: want cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed name"))
			}
		}
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			v.add(field.Invalid(p.Child("requests").Key(string(name)), req.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String()))
		}
	}
}

// largestQuantity is the largest value of resource name that converts to
// its cgroup setting without overflow: in milli-units for cpu, in units
// (bytes) for the others.
func largestQuantity(name v1.ResourceName) resource.Quantity {
	if name == v1.ResourceCPU {
		return *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	}
	return *resource.NewQuantity(math.MaxInt64, resource.BinarySI)
}

var knownResources = map[v1.ResourceName]bool{
	v1.ResourceCPU: true, v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true,
}

func (v *validator) probe(p *field.Path, pr *v1.Probe) {
	n := 0
	for _, set := range []bool{pr.Exec != nil, pr.HTTPGet != nil, pr.TCPSocket != nil, pr.GRPC != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		v.add(field.Required(p, "must specify a handler type: one of exec, httpGet, tcpSocket, grpc"))
	case n > 1:
		v.add(field.Forbidden(p, fmt.Sprintf("%d handlers set: may not specify more than 1 handler type", n)))
	}
	for _, f := range []struct {
		name string
		val  int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds},
		{"periodSeconds", pr.PeriodSeconds}, {"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold},
	} {
		v.add(apivalidation.ValidateNonnegativeField(int64(f.val), p.Child(f.name))...)
	}
	v.seconds(p.Child("terminationGracePeriodSeconds"), pr.TerminationGracePeriodSeconds, 1)
}

// dnsSearchPattern is a DNS-1123 subdomain that may hold underscores, as the
// API server takes a search domain (ValidateDNS1123SubdomainWithUnderScore).
var dnsSearchPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?(\.[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?)*$`)
})

// dnsConfig is the API server's validatePodDNSConfig, and more: an option's
// name and value go into resolv.conf as they are, so they may hold no space
// or line break (the API server only wants a name).
func (v *validator) dnsConfig(s *v1.PodSpec, p *field.Path) {
	c := s.DNSConfig
	if s.DNSPolicy == v1.DNSNone {
		if c == nil {
			v.add(field.Required(p, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", v1.DNSNone)))
			return
		}
		if len(c.Nameservers) == 0 {
			v.add(field.Required(p.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", v1.DNSNone)))
		}
	}
	if c == nil {
		return
	}
	if len(c.Nameservers) > maxDNSNameservers {
		v.add(field.Invalid(p.Child("nameservers"), c.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range c.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil || strings.Contains(ns, "%") {
			v.add(field.Invalid(p.Child("nameservers").Index(i), ns, "must be a valid IP address"))
		}
	}
	if len(c.Searches) > maxDNSSearchPaths {
		v.add(field.Invalid(p.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(c.Searches, " ")) > maxDNSSearchListChars {
		v.add(field.Invalid(p.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range c.Searches {
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		if len(search) > validation.DNS1123SubdomainMaxLength || !dnsSearchPattern().MatchString(search) {
			v.add(field.Invalid(p.Child("searches").Index(i), search, "a lowercase RFC 1123 subdomain (underscores allowed) of at most 253 characters"))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			v.add(field.Required(p.Child("options").Index(i).Child("name"), "must not be empty"))
		}
		if strings.ContainsAny(o.Name, " \t\r\n:#;") {
			v.add(field.Invalid(p.Child("options").Index(i).Child("name"), o.Name, "must not contain spaces, line breaks, ':', '#' or ';'"))
		}
		if o.Value != nil && strings.ContainsAny(*o.Value, " \t\r\n#;") {
			v.add(field.Invalid(p.Child("options").Index(i).Child("value"), *o.Value, "must not contain spaces, line breaks, '#' or ';'"))
		}
	}
}

// The kubelet's limits on a container's restartPolicyRules.
const (
	maxRestartRules     = 20
	maxRestartExitCodes = 255
)
