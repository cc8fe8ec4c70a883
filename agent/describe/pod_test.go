package describe

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/prober"
)

// describe POD shows what the tables do not: the last exit's code and reason,
// the probes and their last results, the mounts, the network and the pod's
// events (not another pod's, nor an older generation's).
func TestDescribePod(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	pod := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u2",
			Annotations: map[string]string{"kubernetes.io/config.source": "file"}},
		Spec: v1.PodSpec{NodeName: "node1",
			Containers: []v1.Container{{Name: "httpd", Image: "busybox:1.36",
				Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/var/www"}, {Name: "conf", MountPath: "/etc/httpd.conf", SubPath: "httpd.conf", ReadOnly: true}}}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "conf", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/web"}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.86.0.7", QOSClass: v1.PodQOSBestEffort, StartTime: &metav1.Time{Time: now.Add(-time.Hour)},
			ContainerStatuses: []v1.ContainerStatus{{Name: "httpd", RestartCount: 4, ContainerID: "staticpodd://abc",
				State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container"}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
					StartedAt: at(3 * time.Minute), FinishedAt: at(2 * time.Minute), ContainerID: "staticpodd://abc"}}}}},
	}
	evs := []v1.Event{
		{Type: "Warning", Reason: "BackOff", Message: "Back-off restarting failed container httpd\x1b[2J", Count: 5,
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-node1", UID: "u2", FieldPath: "spec.containers{httpd}"},
			FirstTimestamp: at(10 * time.Minute), LastTimestamp: at(time.Minute)},
		{Type: "Normal", Reason: "Pulled", Message: "old generation", InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-node1", UID: "u1"}},
		{Type: "Normal", Reason: "Started", Message: "another pod", InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db-node1", UID: "u3"}},
	}
	probes := []prober.Status{{Namespace: "default", Pod: "web-node1", Container: "httpd", Probe: prober.Liveness, Result: "failure",
		Output: "HTTP probe failed with statuscode: 503", At: now.Add(-30 * time.Second)}}
	var b bytes.Buffer
	if err := Pod(&b, pod, evs, probes, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`(?m)^Name: +web-node1$`,
		`(?m)^Status: +Running$`,
		`(?m)^  Host Network: +false$`,
		`(?m)^  IP: +10\.86\.0\.7$`,
		`(?m)^  Ports: +0\.0\.0\.0:8080->80/TCP \(httpd\)$`,
		`(?m)^    State: +Waiting\n      Reason: +CrashLoopBackOff$`,
		`(?m)^    Last State: +Terminated\n      Reason: +OOMKilled\n      Exit Code: +137$`,
		`(?m)^      Finished: .* \(2m ago\)$`,
		`(?m)^    Restart Count: +4$`,
		`(?m)^    Liveness: +http-get http://:80/healthz delay=0s timeout=1s period=10s #success=1 #failure=3$`,
		`(?m)^      Last Result: +failure \(30s ago\): HTTP probe failed with statuscode: 503$`,
		`(?m)^      /var/www from data \(rw\)$`,
		`(?m)^      /etc/httpd.conf from conf \(ro, path "httpd.conf"\)$`,
		`(?m)^  conf: +HostPath /etc/web$`,
		`(?m)^  Warning +BackOff +60s \(x5 over 10m\) +httpd +Back-off restarting failed container httpd\\x1b\[2J$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("describe lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "old generation") || strings.Contains(out, "another pod") || strings.Contains(out, "\x1b") {
		t.Errorf("describe shows another pod's or generation's events, or a raw escape:\n%s", out)
	}
}

func TestSelectAndCompletions(t *testing.T) {
	pods := []v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"}, Spec: v1.PodSpec{NodeName: "node1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "etcd-node1", Namespace: "kube-system"}, Spec: v1.PodSpec{NodeName: "node1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "other"}, Spec: v1.PodSpec{NodeName: "node1"}},
	}
	got, err := Select(pods, []string{"etcd", "other/web"})
	if err != nil || len(got) != 2 || got[0].Namespace != "kube-system" || got[1].Namespace != "other" {
		t.Errorf("Select(etcd, other/web) = %v, %v", got, err)
	}
	if _, err := Find(pods, "web", ""); err == nil || !strings.Contains(err.Error(), "several namespaces") {
		t.Errorf("Find(web) err %v, want ambiguous", err)
	}
	if p, err := Find(pods, "web", "other"); err != nil || p.Namespace != "other" {
		t.Errorf("Find(web, other) = %v, %v", p, err)
	}
	if c := PodCompletions(pods, "e"); strings.Join(c, " ") != "etcd etcd-node1" {
		t.Errorf("PodCompletions(e) = %v", c)
	}
	if c := ImageCompletions([]string{"docker.io/library/busybox:latest", "registry.k8s.io/pause:3.10"}, ""); strings.Join(c, " ") !=
		"busybox:latest docker.io/library/busybox:latest registry.k8s.io/pause:3.10" {
		t.Errorf("ImageCompletions = %v", c)
	}
}

// A manifest's strings reach describe unvalidated (the API server lets
// control characters through a mount path, a hostPath, a probe's path and
// host): describe shows them escaped, never raw to the terminal.
func TestDescribePodEscapesManifestStrings(t *testing.T) {
	const esc = "\x1b]0;owned\x07\x1b[2J"
	pod := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u1",
			Annotations: map[string]string{"kubernetes.io/config.source": "file" + esc}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "busybox" + esc,
				LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/h" + esc, Host: "a" + esc, Port: intstr.FromInt32(80)}}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: "b" + esc, Port: intstr.FromString("p" + esc)}}},
				VolumeMounts:   []v1.VolumeMount{{Name: "v", MountPath: "/m" + esc, SubPath: "s" + esc}}}},
			Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/" + esc}}}}},
		Status: v1.PodStatus{Reason: "Evicted" + esc, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Image: "busybox" + esc, ImageID: "id" + esc,
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Error" + esc}}}}},
	}
	var b bytes.Buffer
	if err := Pod(&b, pod, nil, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("describe writes a manifest's control characters raw:\n%q", out)
	}
	for _, want := range []string{`/m\x1b]0;owned\x07\x1b[2J from v`, `HostPath /tmp/\x1b]0;owned`, `http-get http://a\x1b]0;owned`} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %s:\n%s", want, out)
		}
	}
}

// A running debug container shows under Ephemeral Containers, as kubectl
// describe shows one.
func TestDescribeEphemeralContainer(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger-abcde", Image: "tools:1"}, TargetContainerName: "main"}}},
		Status: v1.PodStatus{EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "debugger-abcde", Image: "tools:1",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Minute))}}}}},
	}
	var b bytes.Buffer
	if err := Pod(&b, pod, nil, nil, now); err != nil {
		t.Fatal(err)
	}
	want := `(?m)^Ephemeral Containers:\n  debugger-abcde:\n    Image: +tools:1\n(.*\n)*    State: +Running\n      Started: .*\(60s ago\)$`
	if !regexp.MustCompile(want).MatchString(b.String()) {
		t.Errorf("describe printed\n%s\nwant it to match %s", b.String(), want)
	}
}
