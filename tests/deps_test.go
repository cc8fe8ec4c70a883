package tests

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestImportFences keeps the layout's promises (DESIGN.md): agent/ never sees
// libcontainer, oci/ never sees k8s.io, only agent/mirror may import client-go,
// and agent/podspec, which both sides import, stays small (its logfiles, which
// the container monitor links, the standard library only); so does
// agent/atomicfile, both sides' one way to write a record that must survive a
// power cut.
func TestImportFences(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Deps", "../agent/...", "../oci/...", "../sysd/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/staticpodd/staticpodd/"
	type pkg struct {
		ImportPath string
		Deps       []string
	}
	dec := json.NewDecoder(out)
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.ImportPath, mod) {
			continue
		}
		checked++
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, d := range p.Deps {
			switch {
			case strings.HasPrefix(rel, "agent") && strings.HasPrefix(d, "github.com/opencontainers/runc"):
				t.Errorf("%s imports %s: agent/ must never see libcontainer", rel, d)
			case strings.HasPrefix(rel, "agent") && strings.HasPrefix(d, mod+"oci"):
				t.Errorf("%s imports %s: agent/ talks to oci/ only through agent.Runtime", rel, d)
			case strings.HasPrefix(rel, "oci") && strings.HasPrefix(d, "k8s.io/"):
				t.Errorf("%s imports %s: oci/ never sees k8s.io types, only agent/podspec", rel, d)
			case strings.HasPrefix(rel, "oci") && strings.HasPrefix(d, mod+"agent") && d != mod+"agent/podspec" && d != mod+"agent/podspec/logfiles" && d != mod+"agent/atomicfile":
				t.Errorf("%s imports %s: oci/ may only import agent/podspec (and its logfiles) and agent/atomicfile from agent/", rel, d)
			case strings.HasPrefix(d, "k8s.io/client-go") && !strings.HasPrefix(rel, "agent/mirror"):
				t.Errorf("%s imports %s: only agent/mirror may import client-go", rel, d)
			case strings.HasPrefix(rel, "sysd") && (strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "github.com/opencontainers/")):
				t.Errorf("%s imports %s: sysd/ knows only systemd", rel, d)
			case (rel == "agent/podspec/logfiles" || rel == "agent/atomicfile") && strings.Contains(strings.Split(d, "/")[0], "."):
				t.Errorf("%s imports %s: the container monitor links it; the standard library only", rel, d)
			case rel == "agent/podspec" && strings.Contains(strings.Split(d, "/")[0], ".") &&
				d != "github.com/google/go-containerregistry/pkg/name" && d != "github.com/opencontainers/go-digest":
				t.Errorf("%s imports %s: podspec needs only the standard library and the image reference parser", rel, d)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if checked == 0 {
		t.Fatal("go list returned none of our packages")
	}
}

// daemonModules are the modules linked into the staticpodd binary. Every
// process of the binary runs all their package inits before main, the
// re-execs too: each container's monitor and libcontainer's init (see
// docs/benchmarks.md, "Start-up of a re-exec"). A module joins this list
// deliberately, with the inits it adds measured
// (GODEBUG=inittrace=1 staticpodd version).
var daemonModules = []string{
	// runc's libcontainer and what it links.
	"github.com/aperturerobotics/protobuf-go-lite",
	"github.com/checkpoint-restore/go-criu/v8",
	"github.com/cilium/ebpf",
	"github.com/containerd/console",
	"github.com/cyphar/filepath-securejoin",
	"github.com/godbus/dbus/v5",
	"github.com/moby/sys/capability",
	"github.com/moby/sys/mountinfo",
	"github.com/moby/sys/user",
	"github.com/moby/sys/userns",
	"github.com/mrunalp/fileutils",
	"github.com/opencontainers/cgroups",
	"github.com/opencontainers/runc",
	"github.com/opencontainers/runtime-spec",
	"github.com/opencontainers/selinux",
	"github.com/sirupsen/logrus",
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	// The image store.
	"github.com/google/go-containerregistry",
	"github.com/klauspost/compress",
	"github.com/opencontainers/go-digest",
	"github.com/opencontainers/image-spec",
	// Registry pulls: go-containerregistry's remote links docker/cli's config
	// package (and its credential-helpers client) for authn; hosts.toml is
	// read with go-toml. Their inits, with remote's own, take about 0.04 ms
	// of clock a re-exec (inittrace: remote/transport 0.025 ms,
	// authchallenge 0.006 ms, go-toml 0.001 ms, docker/cli/config 0 ms).
	"github.com/docker/cli",
	"github.com/docker/docker-credential-helpers",
	"github.com/pelletier/go-toml/v2",
	// systemd, the CLI, manifests, the file source.
	"github.com/coreos/go-systemd/v22",
	"github.com/fsnotify/fsnotify",
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"go.yaml.in/yaml/v2",
	"go.yaml.in/yaml/v3",
	"sigs.k8s.io/json",
	"sigs.k8s.io/yaml",
	"golang.org/x/net",
	"golang.org/x/sync",
	"golang.org/x/sys",
	"golang.org/x/term",
	"golang.org/x/text",
	"golang.org/x/time",
	// Kubernetes types, and client-go for mirror pods (agent/mirror), with
	// what they link.
	"k8s.io/api",
	"k8s.io/apimachinery",
	"k8s.io/client-go",
	"k8s.io/klog/v2",
	"k8s.io/kube-openapi",
	"k8s.io/kubelet", // stats/v1alpha1 only; never config/v1beta1 (heavyModules)
	"k8s.io/utils",
	"github.com/davecgh/go-spew",
	"github.com/fxamacker/cbor/v2",
	"github.com/go-logr/logr",
	"github.com/go-openapi/jsonpointer",
	"github.com/go-openapi/jsonreference",
	"github.com/go-openapi/swag",
	"github.com/go-openapi/swag/cmdutils",
	"github.com/go-openapi/swag/conv",
	"github.com/go-openapi/swag/fileutils",
	"github.com/go-openapi/swag/jsonutils",
	"github.com/go-openapi/swag/loading",
	"github.com/go-openapi/swag/mangling",
	"github.com/go-openapi/swag/netutils",
	"github.com/go-openapi/swag/pools",
	"github.com/go-openapi/swag/stringutils",
	"github.com/go-openapi/swag/typeutils",
	"github.com/go-openapi/swag/yamlutils",
	"github.com/google/gnostic-models",
	"github.com/google/uuid",
	"github.com/json-iterator/go",
	"github.com/modern-go/concurrent",
	"github.com/modern-go/reflect2",
	"github.com/munnerz/goautoneg",
	"github.com/x448/float16",
	"golang.org/x/oauth2",
	"google.golang.org/protobuf",
	"gopkg.in/inf.v0",
	"sigs.k8s.io/randfill",
	"sigs.k8s.io/structured-merge-diff/v6",
	// The node API's /metrics (prometheus client_golang, with what it
	// links): 17 package inits, 0.64 ms and 214 KB of every re-exec's
	// start-up (GODEBUG=inittrace=1 staticpodd version, median of 11 runs).
	"github.com/prometheus/client_golang",
	"github.com/prometheus/client_model",
	"github.com/prometheus/common",
	"github.com/prometheus/procfs",
	"github.com/beorn7/perks",
	"github.com/cespare/xxhash/v2",
	// The sandbox: the default seccomp profile (moby's), libseccomp (cgo,
	// the seccomp build tag), SELinux labels, the kubelet's sysctl
	// namespace helper.
	"github.com/moby/profiles/seccomp",
	"github.com/seccomp/libseccomp-golang",
	"github.com/opencontainers/selinux",
	"k8s.io/component-helpers",
	// The pod network: libcni (7 package inits, 0.02 ms and 5 KB of every
	// re-exec's start-up, measured as above).
	"github.com/containernetworking/cni",
}

// heavyModules must not be linked into the binary, and why.
var heavyModules = map[string]string{
	"k8s.io/component-base": "k8s.io/kubelet/config/v1beta1 pulls it (and prometheus, OpenTelemetry) in; " +
		"agent/config decodes into its generated copy of the kubelet's types instead",
	"go.opentelemetry.io/otel": "came only through k8s.io/component-base",
}

// heavyPackages must not be linked into the binary, and why.
var heavyPackages = map[string]string{
	"k8s.io/client-go/kubernetes": "client-go's typed clientset links every API group and registers them all " +
		"in every re-exec (about 3 ms and 1.3 MB before main, and a third of the binary); " +
		"agent/mirror's api is client-go's REST client with a scheme of the four groups it uses",
	"k8s.io/client-go/kubernetes/scheme": "registers every API group at init (see k8s.io/client-go/kubernetes)",
}

// TestDaemonPackages keeps heavyPackages out of the binary.
func TestDaemonPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "netgo osusergo seccomp", "../cmd/staticpodd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 100 {
		t.Fatalf("go list named %d packages: not the binary's", len(pkgs))
	}
	for _, p := range pkgs {
		if why, ok := heavyPackages[p]; ok {
			t.Errorf("the binary links %s: %s", p, why)
		}
	}
}

// TestDaemonModules pins the set of modules linked into the binary (as make
// build builds it, with its tags), so that a heavy one cannot creep in unnoticed.
func TestDaemonModules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "netgo osusergo seccomp",
		"-f", "{{if .Module}}{{.Module.Path}}{{end}}", "../cmd/staticpodd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		if m != "github.com/staticpodd/staticpodd" {
			linked[m] = true
		}
	}
	if len(linked) == 0 {
		t.Fatal("go list named no module")
	}
	pinned := map[string]bool{}
	for _, m := range daemonModules {
		pinned[m] = true
	}
	for m := range linked {
		if why, ok := heavyModules[m]; ok {
			t.Errorf("the binary links %s: %s", m, why)
		} else if !pinned[m] {
			t.Errorf("the binary links %s, a new module: measure what its inits cost every re-exec and add it to daemonModules", m)
		}
	}
	for m := range pinned {
		if !linked[m] {
			t.Errorf("the binary no longer links %s: remove it from daemonModules", m)
		}
	}
}

// monitorPackages are this module's packages the monitor's program
// (oci/monitor/exe) may link. Every container start executes that program
// twice (its monitor, and its init that libcontainer re-executes from it)
// and every exit once more: its package inits cost 0.7-1.3 ms and 40 KB,
// the daemon's 5.7-9 ms and 1.25 MB (GODEBUG=inittrace=1).
var monitorPackages = []string{
	"github.com/staticpodd/staticpodd/oci/monitor",
	"github.com/staticpodd/staticpodd/oci/monitor/exe",
	"github.com/staticpodd/staticpodd/agent/atomicfile",
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles",
}

// libcontainerRoles are the packages of runc's that the monitor needs, whose
// modules are the only others it may link.
var libcontainerRoles = []string{
	"github.com/opencontainers/runc/libcontainer",
	"github.com/opencontainers/runc/libcontainer/nsenter",
	"github.com/opencontainers/runc/libcontainer/specconv",
	"github.com/opencontainers/cgroups/devices",
}

// TestMonitorModules keeps the monitor's program to libcontainer and the
// monitor: nothing of the daemon (the image store, the agent, k8s.io,
// client-go, prometheus) may land in every container start unnoticed.
func TestMonitorModules(t *testing.T) {
	deps := func(pkgs ...string) []string {
		t.Helper()
		args := append([]string{"list", "-deps", "-tags", "netgo osusergo seccomp",
			"-f", "{{if .Module}}{{.Module.Path}} {{.ImportPath}}{{end}}"}, pkgs...)
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", pkgs, err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	allowed := map[string]bool{}
	for _, l := range deps(libcontainerRoles...) {
		mod, _, _ := strings.Cut(l, " ")
		allowed[mod] = true
	}
	ours := map[string]bool{}
	for _, p := range monitorPackages {
		ours[p] = true
	}
	linked := deps("../oci/monitor/exe")
	if len(linked) < 50 || len(allowed) < 5 {
		t.Fatalf("go list named %d packages and %d modules: not the monitor's program and libcontainer", len(linked), len(allowed))
	}
	for _, l := range linked {
		mod, pkg, _ := strings.Cut(l, " ")
		switch {
		case mod == "github.com/staticpodd/staticpodd":
			if !ours[pkg] {
				t.Errorf("the monitor's program links %s: keep the daemon's packages out of it, or add it to monitorPackages", pkg)
			}
		case !allowed[mod]:
			t.Errorf("the monitor's program links %s (through %s), which libcontainer does not need", mod, pkg)
		}
	}
}
