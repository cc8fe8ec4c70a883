package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const manifestPath = "/etc/kubernetes/manifests/static-pod.yaml"

func parseFixture(t *testing.T, name string) (Pod, []string) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	pods, warnings, err := ParseFile(data, manifestPath, "node1")
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	return pods[0], warnings
}

func TestParseSeedPodWithTypo(t *testing.T) {
	p, warnings := parseFixture(t, "static-pod.yaml")
	if len(warnings) != 1 || !strings.Contains(warnings[0], `: metadata.lables: unknown field, ignored`) || !strings.Contains(warnings[0], manifestPath) {
		t.Errorf("warnings = %q, want one naming metadata.lables and the file", warnings)
	}
	// Pinned: this UID must not change across staticpodd or library versions,
	// or every static pod restarts on upgrade.
	const wantUID = "4f85321ce04a0c42c6046b9e4cf9a396"
	if p.UID != wantUID || p.Annotations[AnnotationHash] != wantUID {
		t.Errorf("UID %q, config.hash %q, want %q", p.UID, p.Annotations[AnnotationHash], wantUID)
	}
	if p.Name != "static-pod-node1" || p.Namespace != "default" || p.Spec.NodeName != "node1" {
		t.Errorf("name %q namespace %q nodeName %q", p.Name, p.Namespace, p.Spec.NodeName)
	}
	if p.Annotations[AnnotationSource] != SourceFile || p.Source != SourceFile || p.Origin != manifestPath {
		t.Errorf("source %q/%q origin %q", p.Annotations[AnnotationSource], p.Source, p.Origin)
	}
	c := p.Spec.Containers[0]
	if c.ImagePullPolicy != v1.PullAlways || c.Ports[0].Protocol != v1.ProtocolTCP ||
		c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != v1.TerminationMessageReadFile {
		t.Errorf("container defaults: %+v", c)
	}
	s := p.Spec
	if s.RestartPolicy != v1.RestartPolicyAlways || *s.TerminationGracePeriodSeconds != 30 || s.DNSPolicy != v1.DNSClusterFirst ||
		s.SchedulerName != "default-scheduler" || !*s.EnableServiceLinks || s.SecurityContext == nil {
		t.Errorf("spec defaults: %+v", s)
	}
	if len(s.Tolerations) != 1 || s.Tolerations[0].Effect != v1.TaintEffectNoExecute || s.Tolerations[0].Operator != v1.TolerationOpExists {
		t.Errorf("tolerations = %+v", s.Tolerations)
	}
}

func TestUIDStableAcrossFormatting(t *testing.T) {
	yamlPod, _ := parseFixture(t, "static-pod.yaml")
	reformatted := `{"kind":"Pod","spec":{"containers":[{"ports":[{"name":"http-server","containerPort":81}],
		"image":"nginx:latest","name":"test-static"}]},
		"metadata":{"lables":{"app":"nginx"},"name":"static-pod"},"apiVersion":"v1"}`
	pods, _, err := ParseFile([]byte("# a comment\n"+reformatted), manifestPath, "node1")
	if err != nil {
		t.Fatal(err)
	}
	if pods[0].UID != yamlPod.UID {
		t.Errorf("JSON with other key order: UID %q, YAML: %q", pods[0].UID, yamlPod.UID)
	}
	for name, change := range map[string][3]string{
		"image":     {"nginx:latest", "nginx:1.27", manifestPath},
		"port":      {"81", "82", manifestPath},
		"path":      {"", "", "/etc/kubernetes/manifests/other.yaml"},
		"node name": {"", "", manifestPath},
	} {
		data, _ := os.ReadFile("testdata/static-pod.yaml")
		if change[0] != "" {
			data = []byte(strings.Replace(string(data), change[0], change[1], 1))
		}
		node := "node1"
		if name == "node name" {
			node = "node2"
		}
		pods, _, err := ParseFile(data, change[2], node)
		if err != nil {
			t.Fatal(err)
		}
		if pods[0].UID == yamlPod.UID {
			t.Errorf("changing the %s kept UID %q", name, yamlPod.UID)
		}
	}
}

func TestOwnUIDKept(t *testing.T) {
	data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  uid: my-uid\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n"
	pods, _, err := ParseFile([]byte(data), "/m/a.yaml", "n")
	if err != nil {
		t.Fatal(err)
	}
	if pods[0].UID != "my-uid" || pods[0].Annotations[AnnotationHash] != "my-uid" {
		t.Errorf("UID %q", pods[0].UID)
	}
	if pods[0].Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent {
		t.Errorf("pull policy %q for a tagged image", pods[0].Spec.Containers[0].ImagePullPolicy)
	}
}

func TestParseURL(t *testing.T) {
	const url = "http://127.0.0.1:8080/pods"
	web, _ := os.ReadFile("testdata/static-web.yaml")
	pods, warnings, err := ParseURL(web, url, "node1")
	if err != nil || len(warnings) != 0 {
		t.Fatalf("single pod: %v %q", err, warnings)
	}
	if pods[0].Name != "static-web-node1" || pods[0].Source != SourceHTTP || pods[0].Annotations[AnnotationSource] != "http" || len(pods[0].Spec.Tolerations) != 0 {
		t.Errorf("pod %s source %s tolerations %v", pods[0].Name, pods[0].Source, pods[0].Spec.Tolerations)
	}
	list := `{"apiVersion":"v1","kind":"PodList","items":[
	  {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
	  {"metadata":{"name":"b","colour":"red"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`
	pods, warnings, err = ParseURL([]byte(list), url, "node1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods[0].Name != "a-node1" || pods[1].Name != "b-node1" || pods[0].UID == pods[1].UID {
		t.Errorf("pods = %v", pods)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `: items[1].metadata.colour: unknown field, ignored`) {
		t.Errorf("warnings = %q", warnings)
	}
	bad := strings.Replace(list, `"image":"busybox"}]}}]`, `"image":""}]}}]`, 1)
	if _, _, err := ParseURL([]byte(bad), url, "node1"); err == nil || !strings.Contains(err.Error(), "items[1].spec.containers[0].image: Required value") {
		t.Errorf("err = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "", "empty manifest"},
		{"not yaml", "{{{", "not YAML or JSON"},
		{"wrong kind", "apiVersion: v1\nkind: Service\nmetadata:\n  name: p\n", `kind: Unsupported value: "Service": supported values: "Pod"`},
		{"list in a file", "apiVersion: v1\nkind: PodList\nitems: []\n", `kind: Unsupported value: "PodList": supported values: "Pod"`},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: p\n", "kind: Required value: want Pod"},
		{"wrong apiVersion", "apiVersion: v2\nkind: Pod\n", `apiVersion: Unsupported value: "v2": supported values: "v1"`},
		{"a list", "- a\n- b\n", "not a Kubernetes object: the document is a list"},
		{"no name", "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: i}]\n", "metadata.name: Required value"},
		{"bad type", head + "spec:\n  containers: 3\n", "spec.containers"},
		{"no containers", head + "spec: {}\n", "spec.containers: Required value: at least one container is required"},
		{"bad name", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Big_Name\nspec:\n  containers: [{name: c, image: i}]\n", `metadata.name: Invalid value: "Big_Name-n": a lowercase RFC 1123 subdomain`},
		{"bad namespace", head + "  namespace: Kube_System\nspec:\n  containers: [{name: c, image: i}]\n", "metadata.namespace"},
		{"container name", head + "spec:\n  containers: [{name: C_1, image: i}]\n", "spec.containers[0].name"},
		{"duplicate container", head + "spec:\n  initContainers: [{name: c, image: i}]\n  containers: [{name: c, image: i}]\n", `spec.containers[0].name: Duplicate value: "c": also spec.initContainers[0]`},
		{"no image", head + "spec:\n  containers: [{name: c}]\n", "spec.containers[0].image: Required value"},
		{"image climbing out", head + "spec:\n  containers: [{name: c, image: '../../etc:x'}]\n", `spec.containers[0].image: Invalid value: "../../etc:x": not an image reference: registry ".."`},
		{"image path", head + "spec:\n  initContainers: [{name: i, image: 'docker.io/library/../x'}]\n  containers: [{name: c, image: i}]\n", `spec.initContainers[0].image: Invalid value: "docker.io/library/../x": not an image reference: repository path component ".."`},
		{"image upper case", head + "spec:\n  containers: [{name: c, image: Busybox}]\n", `spec.containers[0].image: Invalid value: "Busybox": not an image reference`},
		{"image tag", head + "spec:\n  containers: [{name: c, image: 'busybox:-1'}]\n", `spec.containers[0].image: Invalid value: "busybox:-1": not an image reference: tag "-1"`},
		{"image digest", head + "spec:\n  containers: [{name: c, image: 'busybox@sha256:abc'}]\n", `spec.containers[0].image: Invalid value: "busybox@sha256:abc": not an image reference`},
		{"dnsPolicy None without config", head + "spec:\n  dnsPolicy: None\n  containers: [{name: c, image: i}]\n", "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"},
		{"dns nameserver", head + "spec:\n  dnsConfig: {nameservers: ['1.2.3.4\\nnameserver 6.6.6.6']}\n  containers: [{name: c, image: i}]\n", "spec.dnsConfig.nameservers[0]: Invalid value"},
		{"dns search", head + "spec:\n  dnsConfig: {searches: ['a b']}\n  containers: [{name: c, image: i}]\n", "spec.dnsConfig.searches[0]: Invalid value"},
		{"dns option line break", head + "spec:\n  dnsConfig: {options: [{name: \"ndots\\nnameserver 6.6.6.6\"}]}\n  containers: [{name: c, image: i}]\n", "spec.dnsConfig.options[0].name: Invalid value"},
		{"dns option value", head + "spec:\n  dnsConfig: {options: [{name: ndots, value: '1 x'}]}\n  containers: [{name: c, image: i}]\n", "spec.dnsConfig.options[0].value: Invalid value"},
		{"hostname line break", head + "spec:\n  hostname: \"a\\n10.0.0.1\\tkubernetes\"\n  containers: [{name: c, image: i}]\n", "spec.hostname: Invalid value"},
		{"hostname not a label", head + "spec:\n  hostname: a.b\n  containers: [{name: c, image: i}]\n", "spec.hostname: Invalid value"},
		{"duplicate hostPort", head + "spec:\n  containers:\n  - {name: c, image: i, ports: [{containerPort: 80, hostPort: 8080}]}\n  - {name: d, image: i, ports: [{containerPort: 81, hostPort: 8080, protocol: TCP}]}\n", `spec.containers[1].ports[0].hostPort: Duplicate value: "8080/TCP"`},
		{"subdomain", head + "spec:\n  subdomain: A_B\n  containers: [{name: c, image: i}]\n", "spec.subdomain: Invalid value"},
		{"shared pid", head + "spec:\n  shareProcessNamespace: true\n  containers: [{name: c, image: i}]\n", "spec.shareProcessNamespace: Forbidden: not supported by staticpodd yet"},
		{"restart policy", head + "spec:\n  restartPolicy: Sometimes\n  containers: [{name: c, image: i}]\n", "spec.restartPolicy"},
		{"container restart policy", head + "spec:\n  containers: [{name: c, image: i, restartPolicy: Sometimes}]\n", `spec.containers[0].restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"`},
		{"restart rules without policy", head + "spec:\n  containers: [{name: c, image: i, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [1]}}]}]\n", "spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"},
		{"init restart rules without policy", head + "spec:\n  initContainers: [{name: j, image: i, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [1]}}]}]\n  containers: [{name: c, image: i}]\n", "spec.initContainers[0].restartPolicy: Required value"},
		{"restart rule action", head + "spec:\n  containers: [{name: c, image: i, restartPolicy: Never, restartPolicyRules: [{action: Reboot, exitCodes: {operator: In, values: [1]}}]}]\n", `spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Reboot": supported values: "Restart", "RestartAllContainers"`},
		{"restart rule without exit codes", head + "spec:\n  containers: [{name: c, image: i, restartPolicy: Never, restartPolicyRules: [{action: Restart}]}]\n", "spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified"},
		{"restart rule operator", head + "spec:\n  containers: [{name: c, image: i, restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: Above, values: [1]}}]}]\n", `spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Above": supported values: "In", "NotIn"`},
		{"too many restart rules", head + "spec:\n  containers: [{name: c, image: i, restartPolicy: Never, restartPolicyRules: [" + strings.Repeat("{action: Restart, exitCodes: {operator: In, values: [1]}},", 21) + "]}]\n", "spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items"},
		{"too many exit codes", head + "spec:\n  containers: [{name: c, image: i, restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [" + strings.Repeat("1,", 256) + "]}}]}]\n", "spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many: 256: must have at most 255 items"},
		{"init container probe under its own Never", head + "spec:\n  initContainers: [{name: j, image: i, restartPolicy: Never, readinessProbe: {exec: {command: [x]}}}]\n  containers: [{name: c, image: i}]\n", "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"},
		{"duplicate volume", head + "spec:\n  volumes: [{name: v, emptyDir: {}}, {name: v, emptyDir: {}}]\n  containers: [{name: c, image: i}]\n", `spec.volumes[1].name: Duplicate value: "v"`},
		{"missing volume", head + "spec:\n  containers: [{name: c, image: i, volumeMounts: [{name: nope, mountPath: /x}]}]\n", `spec.containers[0].volumeMounts[0].name: Not found: "nope"`},
		{"relative mountPath", head + "spec:\n  volumes: [{name: v}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: x}]}]\n", "volumeMounts[0].mountPath"},
		{"subPath backsteps", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /x, subPath: a/../../b}]}]\n", `volumeMounts[0].subPath: Invalid value: "a/../../b": must be a relative path without '..'`},
		{"absolute subPath", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /x, subPath: /etc}]}]\n", "volumeMounts[0].subPath"},
		{"subPathExpr backsteps", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /x, subPathExpr: ../$(X)}]}]\n", "volumeMounts[0].subPathExpr"},
		{"subPath and subPathExpr", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /x, subPath: a, subPathExpr: b}]}]\n", "mutually exclusive"},
		{"init container probe", head + "spec:\n  initContainers: [{name: i, image: i, livenessProbe: {exec: {command: [x]}}}]\n  containers: [{name: c, image: i}]\n", "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers"},
		{"liveness successThreshold", head + "spec:\n  containers: [{name: c, image: i, livenessProbe: {exec: {command: [x]}, successThreshold: 2}}]\n", "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		{"readiness grace", head + "spec:\n  containers: [{name: c, image: i, readinessProbe: {exec: {command: [x]}, terminationGracePeriodSeconds: 3}}]\n", "readinessProbe.terminationGracePeriodSeconds: Invalid value: 3: must not be set"},
		{"relative hostPath", head + "spec:\n  volumes: [{name: v, hostPath: {path: data}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].hostPath.path"},
		{"hostPath type", head + "spec:\n  volumes: [{name: v, hostPath: {path: /d, type: Dir}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].hostPath.type"},
		{"pvc volume", head + "spec:\n  volumes: [{name: v, persistentVolumeClaim: {claimName: s}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0]: Forbidden: static pods may only use hostPath, emptyDir, downwardAPI, configMap, secret and projected volumes"},
		{"secret volume without name", head + "spec:\n  volumes: [{name: v, secret: {}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].secret.secretName: Required value"},
		{"secret volume mode", head + "spec:\n  volumes: [{name: v, secret: {secretName: s, defaultMode: 01000}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777"},
		{"configMap item path", head + "spec:\n  volumes: [{name: v, configMap: {name: s, items: [{key: k, path: ../x}]}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].configMap.items[0].path"},
		{"configMap item reserved", head + "spec:\n  volumes: [{name: v, configMap: {name: s, items: [{key: k, path: ..data}]}}]\n  containers: [{name: c, image: i}]\n", "must not start with '..'"},
		{"projected duplicate path", head + "spec:\n  volumes: [{name: v, projected: {sources: [{configMap: {name: a, items: [{key: k, path: p}]}}, {secret: {name: b, items: [{key: k, path: p}]}}]}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].projected: Invalid value: \"p\": conflicting duplicate paths"},
		{"projected token", head + "spec:\n  volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t}}]}}]\n  containers: [{name: c, image: i}]\n", "spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden: static pods may not use service account tokens"},
		{"port range", head + "spec:\n  containers: [{name: c, image: i, ports: [{containerPort: 70000}]}]\n", "spec.containers[0].ports[0].containerPort"},
		{"bad quantity", head + "spec:\n  containers: [{name: c, image: i, resources: {limits: {memory: lots}}}]\n", `spec.containers[0].resources.limits[memory]: Invalid value: "lots": quantities must match`},
		{"string for a number", head + "spec:\n  containers: [{name: c, image: i, ports: [{containerPort: http}]}]\n", `spec.containers[0].ports[0].containerPort: Invalid value: "http": must be an integer, not a string`},
		{"number out of range", head + "spec:\n  containers: [{name: c, image: i, ports: [{containerPort: 99999999999}]}]\n", `spec.containers[0].ports[0].containerPort: Invalid value: 99999999999: out of range: from -2147483648 to 2147483647`},
		{"huge integer", head + "spec:\n  terminationGracePeriodSeconds: 99999999999999999999999\n  containers: [{name: c, image: i}]\n", `spec.terminationGracePeriodSeconds: Invalid value: 1e+23: must be a whole number`},
		{"grace beyond a Duration", head + "spec:\n  terminationGracePeriodSeconds: 9223372036854775807\n  containers: [{name: c, image: i}]\n", `spec.terminationGracePeriodSeconds: Invalid value: 9223372036854775807: must be from 0 to 9223372036 (292 years)`},
		{"object for a list", head + "spec:\n  containers: {name: c, image: i}\n", `spec.containers: Invalid value: {"image":"i","name":"c"}: must be a list, not an object`},
		{"bad duration-like time", head + "  creationTimestamp: yesterday\nspec:\n  containers: [{name: c, image: i}]\n", `metadata.creationTimestamp: Invalid value: "yesterday": parsing time`},
		{"int or string", head + "spec:\n  containers: [{name: c, image: i, livenessProbe: {tcpSocket: {port: [1]}}}]\n", `spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: [1]`},
		{"request above limit", head + "spec:\n  containers: [{name: c, image: i, resources: {limits: {cpu: 1}, requests: {cpu: 2}}}]\n", `spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1`},
		{"memory beyond int64", head + "spec:\n  containers: [{name: c, image: i, resources: {limits: {memory: 1e1000000}}}]\n", `spec.containers[0].resources.limits[memory]: Invalid value: "10e999999": must be at most 9223372036854775807: a larger value does not fit`},
		{"memory wrapping", head + "spec:\n  containers: [{name: c, image: i, resources: {requests: {memory: '9999999999999999999999999'}}}]\n", `spec.containers[0].resources.requests[memory]: Invalid value: "9999999999999999999999999": must be at most`},
		{"cpu beyond milli int64", head + "spec:\n  containers: [{name: c, image: i, resources: {limits: {cpu: 1e18}}}]\n", `spec.containers[0].resources.limits[cpu]: Invalid value: "1E": must be at most 9223372036854775807m`},
		{"uid beyond 32 bits", head + "spec:\n  securityContext: {runAsUser: 4294967296}\n  containers: [{name: c, image: i}]\n", `spec.securityContext.runAsUser: Invalid value: 4294967296: must be between 0 and 2147483647`},
		{"container gid", head + "spec:\n  containers: [{name: c, image: i, securityContext: {runAsGroup: -1}}]\n", `spec.containers[0].securityContext.runAsGroup: Invalid value: -1`},
		{"supplemental group", head + "spec:\n  securityContext: {supplementalGroups: [1, 3000000000]}\n  containers: [{name: c, image: i}]\n", `spec.securityContext.supplementalGroups[1]: Invalid value: 3000000000`},
		{"env name", head + "spec:\n  containers: [{name: c, image: i, env: [{name: '1=x'}]}]\n", "spec.containers[0].env[0].name"},
		{"secret env key", head + "spec:\n  containers: [{name: c, image: i, env: [{name: X, valueFrom: {secretKeyRef: {name: s, key: 'a b'}}}]}]\n", "spec.containers[0].env[0].valueFrom.secretKeyRef.key: Invalid value: \"a b\""},
		{"configMap env name", head + "spec:\n  containers: [{name: c, image: i, env: [{name: X, valueFrom: {configMapKeyRef: {name: S, key: k}}}]}]\n", "spec.containers[0].env[0].valueFrom.configMapKeyRef.name: Invalid value: \"S\""},
		{"envFrom both", head + "spec:\n  containers: [{name: c, image: i, envFrom: [{configMapRef: {name: a}, secretRef: {name: b}}]}]\n", "spec.containers[0].envFrom: Invalid value: \"\": may not have more than one field specified at a time"},
		{"envFrom prefix", head + "spec:\n  containers: [{name: c, image: i, envFrom: [{prefix: 'A=', configMapRef: {name: a}}]}]\n", "spec.containers[0].envFrom[0].prefix"},
		{"service account", head + "spec:\n  serviceAccountName: sa\n  containers: [{name: c, image: i}]\n", "serviceaccounts"},
		{"init container hook", head + "spec:\n  initContainers: [{name: i, image: i, lifecycle: {postStart: {exec: {command: [x]}}}}]\n  containers: [{name: c, image: i}]\n", "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always"},
		{"hook without handler", head + "spec:\n  containers: [{name: c, image: i, lifecycle: {preStop: {}}}]\n", "spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"},
		{"hook with two handlers", head + "spec:\n  containers: [{name: c, image: i, lifecycle: {preStop: {exec: {command: [x]}, sleep: {seconds: 1}}}}]\n", "lifecycle.preStop: Forbidden: may not specify more than 1 handler type"},
		{"exec hook without command", head + "spec:\n  containers: [{name: c, image: i, lifecycle: {postStart: {exec: {}}}}]\n", "lifecycle.postStart.exec.command: Required value"},
		{"httpGet hook scheme", head + "spec:\n  containers: [{name: c, image: i, lifecycle: {postStart: {httpGet: {port: 80, scheme: FTP}}}}]\n", `lifecycle.postStart.httpGet.scheme: Unsupported value: "FTP"`},
		{"httpGet hook port", head + "spec:\n  containers: [{name: c, image: i, lifecycle: {postStart: {httpGet: {port: 0}}}}]\n", "lifecycle.postStart.httpGet.port"},
		{"sleep past the grace period", head + "spec:\n  terminationGracePeriodSeconds: 10\n  containers: [{name: c, image: i, lifecycle: {preStop: {sleep: {seconds: 11}}}}]\n", "lifecycle.preStop.sleep.seconds: Invalid value: 11: must be non-negative and less than terminationGracePeriodSeconds (10)"},
		{"stop signal without os", head + "spec:\n  containers: [{name: c, image: i, lifecycle: {stopSignal: SIGUSR1}}]\n", "lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"},
		{"unknown stop signal", head + "spec:\n  os: {name: linux}\n  containers: [{name: c, image: i, lifecycle: {stopSignal: USR1}}]\n", `spec.containers[0].lifecycle.stopSignal: Invalid value: "USR1": not a supported signal`},
		{"stop signal past RTMAX", head + "spec:\n  os: {name: linux}\n  containers: [{name: c, image: i, lifecycle: {stopSignal: SIGRTMIN+16}}]\n", "lifecycle.stopSignal"},
		{"termination message policy", head + "spec:\n  containers: [{name: c, image: i, terminationMessagePolicy: Always}]\n", `spec.containers[0].terminationMessagePolicy: Unsupported value: "Always"`},
		{"active deadline", head + "spec:\n  activeDeadlineSeconds: 0\n  containers: [{name: c, image: i}]\n", "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647"},
		{"uid with a slash", head + "  uid: ../../etc\nspec:\n  containers: [{name: c, image: i}]\n", `metadata.uid: Invalid value: "../../etc": must be letters, digits`},
		{"uid with a glob", head + "  uid: '*'\nspec:\n  containers: [{name: c, image: i}]\n", "metadata.uid"},
		{"uid starting with a dot", head + "  uid: .hidden\nspec:\n  containers: [{name: c, image: i}]\n", "metadata.uid"},
		{"fileKeyRef no key", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, env: [{name: E, valueFrom: {fileKeyRef: {volumeName: v, path: f}}}]}]\n", "spec.containers[0].env[0].valueFrom.fileKeyRef.key: Required value"},
		{"fileKeyRef bad key", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, env: [{name: E, valueFrom: {fileKeyRef: {volumeName: v, path: f, key: 'a=b'}}}]}]\n", "spec.containers[0].env[0].valueFrom.fileKeyRef.key: Invalid value"},
		{"fileKeyRef no volume", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, env: [{name: E, valueFrom: {fileKeyRef: {volumeName: w, path: f, key: K}}}]}]\n", `spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Not found: "w"`},
		{"fileKeyRef not an emptyDir", head + "spec:\n  volumes: [{name: v, hostPath: {path: /tmp}}]\n  containers: [{name: c, image: i, env: [{name: E, valueFrom: {fileKeyRef: {volumeName: v, path: f, key: K}}}]}]\n", "fileKeyRef.volumeName: Invalid value: \"v\": referenced volume must be of type emptyDir"},
		{"fileKeyRef no path", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, env: [{name: E, valueFrom: {fileKeyRef: {volumeName: v, key: K}}}]}]\n", "fileKeyRef.path: Required value"},
		{"fileKeyRef path out", head + "spec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: c, image: i, env: [{name: E, valueFrom: {fileKeyRef: {volumeName: v, path: a/../../x, key: K}}}]}]\n", `fileKeyRef.path: Invalid value: "a/../../x": must not contain '..'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseFile([]byte(tc.body), "/m/p.yaml", "n")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "/m/p.yaml: ") {
				t.Errorf("err = %v, want it to start with the file and contain %q", err, tc.want)
			}
			if len(Errors(err)) == 0 {
				t.Errorf("Errors(%v) found no *Error", err)
			}
		})
	}
}

// Every form of image reference the kubelet takes is taken.
func TestParseImageReferences(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for _, image := range []string{
		"busybox", "busybox:latest", "busybox:1.36", "library/busybox", "docker.io/library/busybox",
		"localhost:5000/x/y:tag", "localhost/x", "registry.k8s.io/kube-apiserver:v1.37.2",
		"[::1]:5000/etcd:3.5.9-0", "busybox@" + digest, "busybox:1.36@" + digest,
		"quay.io/org/app@" + digest,
	} {
		body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: [{name: c, image: '" + image + "'}]\n"
		if _, _, err := ParseFile([]byte(body), "/m/p.yaml", "n"); err != nil {
			t.Errorf("image %s: %v", image, err)
		}
	}
}

func TestStamp(t *testing.T) {
	p, _ := parseFixture(t, "static-pod.yaml")
	first := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	Stamp(p, func(uid types.UID) time.Time {
		if uid != p.UID {
			t.Errorf("seen asked about %q", uid)
		}
		return first
	})
	if got := p.Annotations[AnnotationSeen]; got != "2026-01-02T03:04:05.000000006Z" {
		t.Errorf("config.seen = %q", got)
	}
}

func TestSkip(t *testing.T) {
	for name, want := range map[string][2]bool{
		"etcd.yaml": {false, false}, ".etcd.yaml.swp": {true, false}, ".hidden": {true, false},
		"etcd.yaml.bak": {true, true}, "etcd.yaml.backup": {true, true}, "etcd.yaml.orig": {true, true},
		"etcd.yaml~": {true, true}, "etcd.yaml.swp": {true, true}, "etcd.yaml.dpkg-old": {true, true},
		"etcd.yaml.dpkg-dist": {true, true}, "etcd.yaml.rpmnew": {true, true}, "etcd.yaml.rpmsave": {true, true},
		"etcd.json": {false, false},
	} {
		skip, warn := Skip("/etc/kubernetes/manifests/" + name)
		if skip != want[0] || warn != want[1] {
			t.Errorf("Skip(%s) = %v, %v; want %v, %v", name, skip, warn, want[0], want[1])
		}
	}
}

// A file pod's UID comes from its absolute, cleaned path however the path was
// typed, so `validate ./x.yaml` shows the UID the daemon gives the pod.
func TestUIDFromAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	data := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n")
	uid := func(path string) string {
		t.Helper()
		pods, _, err := ParseFile(data, path, "n")
		if err != nil {
			t.Fatal(err)
		}
		if pods[0].Origin != path {
			t.Errorf("origin %q, want the path as given %q", pods[0].Origin, path)
		}
		return string(pods[0].UID)
	}
	want := uid(filepath.Join(dir, "x.yaml"))
	for _, path := range []string{"x.yaml", "./x.yaml", "sub/../x.yaml", dir + "//x.yaml"} {
		if got := uid(path); got != want {
			t.Errorf("UID from %q = %s, want %s (from the absolute path)", path, got, want)
		}
	}
	if other := uid(filepath.Join(dir, "sub", "x.yaml")); other == want {
		t.Error("another file with the same content has the same UID")
	}
}

// A file with several Pods runs its first, as the kubelet does, and says the
// others are not used instead of dropping them silently.
func TestMultiDocumentFileWarns(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: i}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers: [{name: c, image: i}]\n")
	pods, warnings, err := ParseFile(data, "/m/two.yaml", "node1")
	if err != nil || len(pods) != 1 || pods[0].Name != "a-node1" {
		t.Fatalf("ParseFile = %v, %v", pods, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "/m/two.yaml: 2 Pods; only the first is used") {
		t.Errorf("warnings = %q", warnings)
	}
	_, warnings, _ = ParseFile([]byte("---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: i}]\n"), "/m/one.yaml", "node1")
	if len(warnings) != 0 {
		t.Errorf("one document with a leading ---: warnings %q", warnings)
	}
}

// <podLogsDir>/<namespace>_<name>_<uid> must fit in one file name: the longest
// name that does is taken, one byte more is refused naming the field and by
// how much, whatever part of the name (manifest or node) makes it long.
func TestLogDirectoryNameLimit(t *testing.T) {
	for _, tc := range []struct{ node, namespace string }{
		{"n", "default"},
		{strings.Repeat("n", 63) + "." + strings.Repeat("o", 63) + "." + strings.Repeat("d", 63), "default"}, // a 191-byte node name
		{"node1", strings.Repeat("k", 63)},
	} {
		// <namespace>_<name>-<node>_<uid>: the UID is 32 bytes.
		longest := maxFileName - len(tc.namespace) - 1 - 1 - len(tc.node) - 1 - 32
		manifest := func(n int) []byte {
			return []byte(fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n  containers: [{name: c, image: i}]\n",
				strings.Repeat("p", n), tc.namespace))
		}
		pods, _, err := ParseFile(manifest(longest), "/m/p.yaml", tc.node)
		if err != nil {
			t.Errorf("node %d bytes, namespace %d: the longest name that fits was refused: %v", len(tc.node), len(tc.namespace), err)
			continue
		}
		if n := len(filepath.Base(Paths{PodLogsDir: "/l"}.LogDir(pods[0].Pod))); n != maxFileName {
			t.Errorf("log directory name is %d bytes, want %d", n, maxFileName)
		}
		_, _, err = ParseFile(manifest(longest+1), "/m/p.yaml", tc.node)
		if err == nil || !strings.Contains(err.Error(), "/m/p.yaml: metadata.name: ") || !strings.Contains(err.Error(), "would be 256 bytes") ||
			!strings.Contains(err.Error(), "shorten it by 1") {
			t.Errorf("node %d bytes, namespace %d: a name one byte too long: err = %v", len(tc.node), len(tc.namespace), err)
		}
	}
}

// A few aliases of a large string expand past MaxSize: refused before the
// JSON conversion writes them all out. Small anchors still work.
func TestAliasExpansionBounded(t *testing.T) {
	big := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    a: &big \"" + strings.Repeat("x", 1<<20) + "\"\n    b: x\nspec:\n  containers: [{name: c, image: i}]\nzz: [" + strings.Repeat("*big, ", 15) + "1]\n"
	if _, _, err := ParseFile([]byte(big), "/m/p.yaml", "n"); err == nil || !strings.Contains(err.Error(), "YAML aliases expand it to more than") {
		t.Errorf("16 MiB through aliases: err = %v", err)
	}
	small := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: &l {app: web}\n  annotations: *l\nspec:\n  containers: [{name: c, image: i}]\n"
	if _, _, err := ParseFile([]byte(small), "/m/p.yaml", "n"); err != nil {
		t.Errorf("small anchors: %v", err)
	}
}

// A manifest with several mistakes reports each of them at once, every error
// naming its field and the value written there, and its warnings too: a user
// fixes the file in one go instead of one error per attempt. A value that
// does not even decode is reported once, not again as missing or zero.
func TestParseReportsEverythingAtOnce(t *testing.T) {
	data := []byte(`apiVersion: v1
kind: Pod
metadata:
  name: web
  lables: {app: web}
spec:
  restartPolicy: Sometimes
  containers:
  - name: web
    image: busybox
    comand: [httpd, -f]
    ports: [{containerPort: http}]
    resources:
      limits: {memory: 32Megs, cpu: 1}
      requests: {cpu: 2}
  - name: web
    image: busybox
`)
	got := Check(data, SourceFile, "/m/web.yaml", "node1")
	if got.Pods != nil {
		t.Errorf("pods %v from an invalid manifest", got.Pods)
	}
	type fv struct{ field, value string }
	var errs []fv
	for _, e := range got.Errors {
		if e.Origin != "/m/web.yaml" {
			t.Errorf("error %v: origin %q", e, e.Origin)
		}
		errs = append(errs, fv{e.Field, e.Value})
	}
	want := []fv{
		{"spec.containers[0].ports[0].containerPort", "http"},
		{"spec.containers[0].resources.limits[memory]", "32Megs"},
		{"spec.containers[0].resources.requests[cpu]", "2"},
		{"spec.containers[1].name", "web"},
		{"spec.restartPolicy", "Sometimes"},
	}
	if fmt.Sprint(errs) != fmt.Sprint(want) {
		t.Errorf("errors (field, value):\n got %v\nwant %v\n%v", errs, want, got.Err())
	}
	var warned []string
	for _, w := range got.Warnings {
		warned = append(warned, w.Field)
	}
	if fmt.Sprint(warned) != "[metadata.lables spec.containers[0].comand]" {
		t.Errorf("warnings on %v, want metadata.lables and spec.containers[0].comand", got.Warnings)
	}
	msg := got.Err().Error()
	for _, line := range []string{
		`/m/web.yaml: spec.containers[0].resources.limits[memory]: Invalid value: "32Megs": quantities must match the regular expression`,
		`/m/web.yaml: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
	} {
		if !strings.Contains(msg, line) {
			t.Errorf("error text lacks %q:\n%s", line, msg)
		}
	}
}

// A negative grace period is taken as 1, as the API server does, and says so.
func TestNegativeGracePeriodWarns(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  terminationGracePeriodSeconds: -5\n  containers: [{name: c, image: i}]\n")
	got := Check(data, SourceFile, "/m/p.yaml", "n")
	if len(got.Errors) != 0 || len(got.Pods) != 1 {
		t.Fatalf("Check: %v", got.Err())
	}
	if g := got.Pods[0].Spec.TerminationGracePeriodSeconds; g == nil || *g != 1 {
		t.Errorf("grace period %v, want 1", g)
	}
	if len(got.Warnings) != 1 || got.Warnings[0].Field != "spec.terminationGracePeriodSeconds" || !strings.Contains(got.Warnings[0].Message, "treated as 1") {
		t.Errorf("warnings %v", got.Warnings)
	}
}

// A bad value is shown shortened, and a string quoted with what is not
// printable escaped: an error never repeats a large or binary value whole.
func TestErrorValueShortened(t *testing.T) {
	long := strings.Repeat("x", 4000) + "\x1b[31m"
	data := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  restartPolicy: \"" + strings.ReplaceAll(long, "\x1b", `\e`) + "\"\n  containers: [{name: c, image: i}]\n")
	got := Check(data, SourceFile, "/m/p.yaml", "n")
	if len(got.Errors) != 1 {
		t.Fatalf("errors %v", got.Errors)
	}
	e := got.Errors[0]
	if len(e.Value) > maxShown+40 || !strings.HasSuffix(e.Value, " bytes)") || strings.Contains(e.Error(), "\x1b") {
		t.Errorf("value shown as %q", e.Value)
	}
}

// A key written twice is taken as the kubelet takes it, the last one wins,
// and a warning says where.
func TestDuplicateKeyWarns(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\nspec:\n  containers: [{name: c, image: i}]\n")
	got := Check(data, SourceFile, "/m/p.yaml", "n")
	if len(got.Errors) != 0 || len(got.Pods) != 1 || got.Pods[0].Name != "b-n" {
		t.Fatalf("pods %v, errors %v", got.Pods, got.Err())
	}
	if len(got.Warnings) != 1 || got.Warnings[0].Message != `line 5: key "name" already set in map; the last one is used, as the kubelet does` {
		t.Errorf("warnings %v", got.Warnings)
	}
}

// documents counts documents by their separator lines, and says 1 without
// reading line by line when no line starts with one.
func TestDocuments(t *testing.T) {
	for in, want := range map[string]int{
		"":                              0,
		"a: 1\n":                        1,
		"a: '---'\nb: |\n  ---\n":       1,
		"---\na: 1\n":                   1,
		"a: 1\n---\n":                   1,
		"a: 1\n---\nb: 2\n":             2,
		"---\na: 1\n--- # x\nb: 2\n":    2,
		"a: 1\r\n---\r\nb: 2\r\n":       2,
		"a: 1\n---\n\n---\nb: 2\n---\n": 2,
	} {
		docs, err := documents([]byte(in))
		if got := len(docs); err != nil || got != want && (got > 1 || want > 1) {
			t.Errorf("documents(%q) = %d, want %d", in, got, want)
		}
	}
}

// A container's own restartPolicy and restartPolicyRules, regular, init
// or sidecar, are taken as the API server takes them (ContainerRestartRules
// and RestartAllContainersOnContainerExits are on by default in v1.37).
func TestParseContainerRestartRules(t *testing.T) {
	rule := "restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}, {action: Restart, exitCodes: {operator: NotIn, values: [0, 1]}}]"
	body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  restartPolicy: Never\n" +
		"  initContainers:\n  - {name: init, image: i, restartPolicy: OnFailure, " + rule + "}\n  - {name: side, image: i, restartPolicy: Always, " + rule + "}\n" +
		"  containers:\n  - {name: c, image: i, restartPolicy: Never, " + rule + "}\n  - {name: d, image: i, restartPolicy: OnFailure}\n"
	pods, _, err := ParseFile([]byte(body), "/m/p.yaml", "n")
	if err != nil {
		t.Fatal(err)
	}
	c := pods[0].Spec.Containers[0]
	if len(c.RestartPolicyRules) != 2 || c.RestartPolicyRules[0].Action != v1.ContainerRestartRuleActionRestartAllContainers {
		t.Errorf("rules %+v", c.RestartPolicyRules)
	}
}

// A manifest's author decides how many unknown fields it has, and each
// warning becomes a manifest problem, an event and a log line: a file of
// thousands must not push every other event out of the daemon's ring nor
// fill ps and the journal. The first warnings are kept, and how many more
// there were.
func TestWarningsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: busybox:1\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "    x%d: 1\n", i)
	}
	p := Check([]byte(b.String()), SourceFile, "/etc/kubernetes/manifests/web.yaml", "node1")
	if len(p.Errors) > 0 || len(p.Pods) != 1 {
		t.Fatalf("errors %v, %d pods; want the pod used", p.Errors, len(p.Pods))
	}
	if len(p.Warnings) > MaxWarnings {
		t.Fatalf("%d warnings, want at most %d", len(p.Warnings), MaxWarnings)
	}
	if !strings.Contains(p.Warnings[0].String(), "x0: unknown field") {
		t.Errorf("first warning %q, want the first unknown field", p.Warnings[0])
	}
	if last := p.Warnings[len(p.Warnings)-1].String(); !strings.Contains(last, fmt.Sprintf("%d more warnings", 5000-(MaxWarnings-1))) {
		t.Errorf("last warning %q, want how many more there were", last)
	}
}
