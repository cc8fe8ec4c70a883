package manifest

import (
	"slices"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestSecurityValidation(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
	for _, tc := range []struct{ name, body, want string }{
		{"seccomp type", head + "  securityContext: {seccompProfile: {type: Default}}\n  containers: [{name: c, image: i}]\n",
			`spec.securityContext.seccompProfile.type: Unsupported value: "Default"`},
		{"localhost without profile", head + "  containers: [{name: c, image: i, securityContext: {seccompProfile: {type: Localhost}}}]\n",
			"spec.containers[0].securityContext.seccompProfile.localhostProfile: Required value"},
		{"localhost climbing out", head + "  containers: [{name: c, image: i, securityContext: {seccompProfile: {type: Localhost, localhostProfile: ../../etc/x.json}}}]\n",
			`seccompProfile.localhostProfile: Invalid value: "../../etc/x.json": must be a relative path without '..'`},
		{"localhost absolute", head + "  containers: [{name: c, image: i, securityContext: {seccompProfile: {type: Localhost, localhostProfile: /etc/x.json}}}]\n",
			`seccompProfile.localhostProfile: Invalid value: "/etc/x.json"`},
		{"profile without Localhost", head + "  securityContext: {seccompProfile: {type: RuntimeDefault, localhostProfile: x.json}}\n  containers: [{name: c, image: i}]\n",
			"spec.securityContext.seccompProfile.localhostProfile: Invalid value: \"x.json\": can only be set when seccomp type is Localhost"},
		{"apparmor localhost", head + "  containers: [{name: c, image: i, securityContext: {appArmorProfile: {type: Localhost}}}]\n",
			"spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value"},
		{"windows", head + "  securityContext: {windowsOptions: {runAsUserName: x}}\n  containers: [{name: c, image: i}]\n",
			"spec.securityContext.windowsOptions: Forbidden: Windows options are not supported"},
		{"container windows", head + "  containers: [{name: c, image: i, securityContext: {windowsOptions: {hostProcess: false}}}]\n",
			"spec.containers[0].securityContext.windowsOptions: Forbidden"},
		{"unmasked proc", head + "  containers: [{name: c, image: i, securityContext: {procMount: Unmasked}}]\n",
			"spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false"},
		{"procMount", head + "  containers: [{name: c, image: i, securityContext: {procMount: Open}}]\n",
			`procMount: Unsupported value: "Open"`},
		{"privileged without escalation", head + "  containers: [{name: c, image: i, securityContext: {privileged: true, allowPrivilegeEscalation: false}}]\n",
			"cannot set `allowPrivilegeEscalation` to false and `privileged` to true"},
		{"sysctl name", head + "  securityContext: {sysctls: [{name: 'net/../x', value: '1'}]}\n  containers: [{name: c, image: i}]\n",
			`spec.securityContext.sysctls[0].name: Invalid value: "net/../x"`},
		{"sysctl duplicate", head + "  securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: '1'}, {name: kernel.shm_rmid_forced, value: '0'}]}\n  containers: [{name: c, image: i}]\n",
			"spec.securityContext.sysctls[1].name: Duplicate value"},
		{"net sysctl with host network", head + "  hostNetwork: true\n  securityContext: {sysctls: [{name: net.ipv4.tcp_syncookies, value: '1'}]}\n  containers: [{name: c, image: i}]\n",
			`spec.securityContext.sysctls[0].name: Invalid value: "net.ipv4.tcp_syncookies": may not be specified when 'hostNetwork' is true`},
		{"ipc sysctl with host ipc", head + "  hostIPC: true\n  securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]}\n  containers: [{name: c, image: i}]\n",
			"may not be specified when 'hostIPC' is true"},
		{"bidirectional unprivileged", head + "  volumes: [{name: v, hostPath: {path: /mnt}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /v, mountPropagation: Bidirectional}]}]\n",
			"spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"},
		{"propagation", head + "  volumes: [{name: v, hostPath: {path: /mnt}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /v, mountPropagation: Both}]}]\n",
			`mountPropagation: Unsupported value: "Both"`},
		{"rro writable", head + "  volumes: [{name: v, hostPath: {path: /mnt}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /v, recursiveReadOnly: Enabled}]}]\n",
			"spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true"},
		{"rro propagating", head + "  volumes: [{name: v, hostPath: {path: /mnt}}]\n  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /v, readOnly: true, recursiveReadOnly: IfPossible, mountPropagation: HostToContainer}]}]\n",
			"recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None"},
		{"downwardAPI climbing out", head + "  volumes: [{name: v, downwardAPI: {items: [{path: ../x, fieldRef: {fieldPath: metadata.name}}]}}]\n  containers: [{name: c, image: i}]\n",
			`spec.volumes[0].downwardAPI.items[0].path: Invalid value: "../x"`},
		{"downwardAPI reserved", head + "  volumes: [{name: v, downwardAPI: {items: [{path: ..data, fieldRef: {fieldPath: metadata.name}}]}}]\n  containers: [{name: c, image: i}]\n",
			`spec.volumes[0].downwardAPI.items[0].path: Invalid value: "..data": must not start with '..'`},
		{"downwardAPI field", head + "  volumes: [{name: v, downwardAPI: {items: [{path: x, fieldRef: {fieldPath: spec.nodeName}}]}}]\n  containers: [{name: c, image: i}]\n",
			`spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: "spec.nodeName"`},
		{"downwardAPI container", head + "  volumes: [{name: v, downwardAPI: {items: [{path: x, resourceFieldRef: {containerName: other, resource: limits.cpu}}]}}]\n  containers: [{name: c, image: i}]\n",
			`spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: Not found: "other"`},
		{"downwardAPI no container", head + "  volumes: [{name: v, downwardAPI: {items: [{path: x, resourceFieldRef: {resource: limits.cpu}}]}}]\n  containers: [{name: c, image: i}]\n",
			"resourceFieldRef.containerName: Required value"},
		{"downwardAPI mode", head + "  volumes: [{name: v, downwardAPI: {defaultMode: 4095, items: [{path: x, fieldRef: {fieldPath: metadata.uid}}]}}]\n  containers: [{name: c, image: i}]\n",
			"spec.volumes[0].downwardAPI.defaultMode: Invalid value: 4095"},
		{"downwardAPI both", head + "  volumes: [{name: v, downwardAPI: {items: [{path: x, fieldRef: {fieldPath: metadata.uid}, resourceFieldRef: {containerName: c, resource: limits.cpu}}]}}]\n  containers: [{name: c, image: i}]\n",
			"fieldRef and resourceFieldRef can not be specified simultaneously"},
		{"fsGroupChangePolicy", head + "  securityContext: {fsGroup: 5, fsGroupChangePolicy: Sometimes}\n  containers: [{name: c, image: i}]\n",
			`spec.securityContext.fsGroupChangePolicy: Unsupported value: "Sometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseFile([]byte(tc.body), "/m/p.yaml", "n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSysctlAllowlist(t *testing.T) {
	safe := SafeSysctls("6.1.0-18-amd64")
	if !slices.Contains(safe, "net.ipv4.tcp_rmem") || !slices.Contains(safe, "kernel.shm_rmid_forced") {
		t.Errorf("SafeSysctls(6.1) = %v, want every safe sysctl", safe)
	}
	if old := SafeSysctls("4.4.0"); slices.Contains(old, "net.ipv4.tcp_keepalive_time") || !slices.Contains(old, "net.ipv4.ip_local_reserved_ports") {
		t.Errorf("SafeSysctls(4.4) = %v: tcp_keepalive_time is namespaced from 4.5, ip_local_reserved_ports from 3.16", old)
	}
	doc := func(hostIPC bool, sysctls ...string) string {
		s := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
		if hostIPC {
			s += "  hostIPC: true\n"
		}
		s += "  securityContext:\n    sysctls:\n"
		for _, n := range sysctls {
			s += "    - {name: " + n + ", value: '1'}\n"
		}
		return s + "  containers: [{name: c, image: i}]\n"
	}
	p := Paths{RootDir: t.TempDir(), SafeSysctls: safe, AllowedUnsafeSysctls: []string{"net.core.somaxconn", "kernel.msg*"}}
	for _, tc := range []struct {
		name    string
		doc     string
		want    map[string]string
		wantErr string
	}{
		{"safe", doc(false, "net.ipv4.tcp_syncookies", "kernel.shm_rmid_forced"), map[string]string{"net.ipv4.tcp_syncookies": "1", "kernel.shm_rmid_forced": "1"}, ""},
		{"slashes", doc(false, "net/ipv4/tcp_syncookies"), map[string]string{"net.ipv4.tcp_syncookies": "1"}, ""},
		{"allowed unsafe", doc(false, "net.core.somaxconn"), map[string]string{"net.core.somaxconn": "1"}, ""},
		{"allowed prefix", doc(false, "kernel.msgmax"), map[string]string{"kernel.msgmax": "1"}, ""},
		{"unsafe", doc(false, "net.ipv4.ip_forward"), nil, `forbidden sysctl "net.ipv4.ip_forward": not allowlisted`},
		{"not namespaced", doc(false, "vm.overcommit_memory"), nil, `forbidden sysctl "vm.overcommit_memory": not known to be namespaced`},
		{"kernel not namespaced", doc(false, "kernel.panic"), nil, "not known to be namespaced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := mustParse(t, tc.doc)
			_, err := Container(pod, &pod.Spec.Containers[0], 0, p, machine(t))
			got := Sandbox(pod, p).Sysctls
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("Sandbox has sysctls %v for a pod refused", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("sysctls %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("sysctls %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestFSGroupIsASupplementalGroup(t *testing.T) {
	pod := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  securityContext: {fsGroup: 2000, supplementalGroups: [5, 6]}\n  containers: [{name: c, image: i}]\n")
	c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{RootDir: t.TempDir()}, machine(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{2000, 5, 6}; !slices.Equal(c.Security.SupplementalGroups, want) {
		t.Errorf("supplemental groups %v, want %v (fsGroup first, as the kubelet)", c.Security.SupplementalGroups, want)
	}
}

func TestMountPropagationAndRecursiveReadOnly(t *testing.T) {
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  volumes: [{name: v, hostPath: {path: /mnt}}]\n" +
		"  containers:\n  - name: c\n    image: i\n    securityContext: {privileged: true}\n    volumeMounts:\n" +
		"    - {name: v, mountPath: /a, readOnly: true, recursiveReadOnly: Enabled}\n" +
		"    - {name: v, mountPath: /b, readOnly: true, recursiveReadOnly: IfPossible}\n" +
		"    - {name: v, mountPath: /c, readOnly: true, recursiveReadOnly: Disabled}\n" +
		"    - {name: v, mountPath: /d, mountPropagation: HostToContainer}\n" +
		"    - {name: v, mountPath: /e, mountPropagation: Bidirectional}\n"
	pod := mustParse(t, doc)
	for _, supported := range []bool{true, false} {
		c, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{RootDir: t.TempDir(), RecursiveReadOnly: supported}, machine(t))
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			rro  bool
			prop podspec.Propagation
		}{{true, ""}, {supported, ""}, {false, ""}, {false, podspec.PropagationHostToContainer}, {false, podspec.PropagationBidirectional}}
		for i, m := range c.Mounts {
			if m.RecursiveReadOnly != want[i].rro || m.Propagation != want[i].prop {
				t.Errorf("kernel rro %v: mount %s: rro %v propagation %q, want %v %q", supported, m.Destination, m.RecursiveReadOnly, m.Propagation, want[i].rro, want[i].prop)
			}
		}
	}
	sub := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  volumes: [{name: v, hostPath: {path: /mnt}}]\n"+
		"  containers: [{name: c, image: i, volumeMounts: [{name: v, mountPath: /a, subPath: x, mountPropagation: HostToContainer}]}]\n")
	if _, err := Container(sub, &sub.Spec.Containers[0], 0, Paths{RootDir: t.TempDir()}, machine(t)); err == nil || !strings.Contains(err.Error(), "mountPropagation HostToContainer with a subPath is not supported") {
		t.Errorf("subPath with propagation: err %v", err)
	}
}
