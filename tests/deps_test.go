package tests

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportFences keeps the layout's promises (docs/architecture.md,
// "Fences"): no part imports the wiring (daemon), agent/ never sees libcontainer, oci/ never sees k8s.io, outside
// agent/mirror nothing links a client-go package that clientGoOutsideMirror
// does not list, and agent/podspec, which both sides import, stays small (its
// logfiles, which the container monitor links, the standard library only); so
// does agent/atomicfile, both sides' one way to write a record that must
// survive a power cut, and agent/host, both sides' one reader of the node's
// memory and kernel release.
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
		inMirror := rel == "agent/mirror" || strings.HasPrefix(rel, "agent/mirror/")
		for _, d := range p.Deps {
			switch {
			case strings.HasPrefix(rel, "agent") && strings.HasPrefix(d, "github.com/opencontainers/runc"):
				t.Errorf("%s imports %s: agent/ must never see libcontainer", rel, d)
			case d == mod+"daemon":
				t.Errorf("%s imports %s: the wiring knows every part, and only cmd/staticpodd knows it", rel, d)
			case strings.HasPrefix(rel, "agent") && strings.HasPrefix(d, mod+"oci"):
				t.Errorf("%s imports %s: agent/ talks to oci/ only through agent.Runtime", rel, d)
			// klog, a logger and no Kubernetes type, comes with sigstore-go's
			// verifier (certificate-transparency-go's log list).
			case strings.HasPrefix(rel, "oci") && strings.HasPrefix(d, "k8s.io/") && !strings.HasPrefix(d, "k8s.io/klog/"):
				t.Errorf("%s imports %s: oci/ never sees k8s.io types, only agent/podspec", rel, d)
			case strings.HasPrefix(rel, "oci") && strings.HasPrefix(d, mod+"agent") && d != mod+"agent/podspec" && d != mod+"agent/podspec/logfiles" && d != mod+"agent/atomicfile" && d != mod+"agent/host":
				t.Errorf("%s imports %s: oci/ may only import agent/podspec (and its logfiles), agent/atomicfile and agent/host from agent/", rel, d)
			case strings.HasPrefix(d, "k8s.io/client-go/") && !inMirror && apiServerClient(d):
				t.Errorf("%s imports %s, which talks to an API server: only agent/mirror may", rel, d)
			case strings.HasPrefix(d, "k8s.io/client-go/") && !inMirror && clientGoOutsideMirror[d] == "":
				t.Errorf("%s imports %s: outside agent/mirror only the client-go packages on clientGoOutsideMirror "+
					"(tests/deps_test.go) may be linked", rel, d)
			case strings.HasPrefix(rel, "sysd") && (strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "github.com/opencontainers/")):
				t.Errorf("%s imports %s: sysd/ knows only systemd", rel, d)
			case (rel == "agent/podspec/logfiles" || rel == "agent/atomicfile") && strings.Contains(strings.Split(d, "/")[0], "."):
				t.Errorf("%s imports %s: the container monitor links it; the standard library only", rel, d)
			case rel == "agent/host" && strings.Contains(strings.Split(d, "/")[0], ".") && d != "golang.org/x/sys/unix":
				t.Errorf("%s imports %s: both sides read the node through it; the standard library and x/sys/unix only", rel, d)
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
	behindFacade(t)
}

// ociBehindFacade are the packages behind oci.Runtime, each imported only
// by packages of oci/: daemon wires the Runtime (and the image store), agent/
// sees agent.Runtime.
var ociBehindFacade = []string{"oci/exec", "oci/sandbox", "oci/stats"}

// behindFacade checks that no package outside oci/ imports one of
// ociBehindFacade.
func behindFacade(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/staticpodd/staticpodd/"
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel := strings.TrimPrefix(f[0], mod)
		for _, d := range f[1:] {
			if !slices.Contains(ociBehindFacade, strings.TrimPrefix(d, mod)) {
				continue
			}
			seen++
			if rel != "oci" && !strings.HasPrefix(rel, "oci/") {
				t.Errorf("%s imports %s: outside oci/ only oci.Runtime is seen", rel, d)
			}
		}
	}
	if seen < len(ociBehindFacade) {
		t.Errorf("%d imports of %v found, want at least one each: is the list stale?", seen, ociBehindFacade)
	}
}

// agentEdges are the imports allowed between agent/ packages: for each agent
// package (every one must be here), the agent packages it may import directly
// (test files aside). It is today's graph, written down so that a new edge is
// a decision: TestAgentEdges fails on an edge missing here, and on one here
// that the code no longer has, so the table stays the map.
var agentEdges = map[string][]string{
	"agent": {
		"agent/atomicfile", "agent/config", "agent/events", "agent/eviction", "agent/histogram",
		"agent/host", "agent/hostfiles", "agent/images", "agent/lifecycle", "agent/manifest", "agent/objects", "agent/poddir", "agent/podspec",
		"agent/podspec/logfiles", "agent/prober", "agent/rollout", "agent/source", "agent/status", "agent/tick", "agent/volumes",
	},
	"agent/atomicdir":  nil,
	"agent/atomicfile": nil,
	"agent/component":  {"agent/config"},
	"agent/config":     {"agent/eviction"},
	// agent/cri answers the CRI from the agent's state (an interface the
	// agent implements), with the node API's listener bounds.
	"agent/cri": {"agent/podspec", "agent/server"},
	// agent/describe formats what the CLI asked the daemon for.
	"agent/describe":         {"agent/events", "agent/prober", "agent/status"},
	"agent/events":           {"agent/podspec"},
	"agent/eviction":         {"agent/podspec"},
	"agent/filestamp":        nil, // a file's stat as a change detector: the manifest source's and restart-on-change's
	"agent/health":           {"agent/server", "agent/source"},
	"agent/histogram":        nil,
	"agent/host":             nil,
	"agent/hostfiles":        {"agent/filestamp", "agent/podspec/logfiles", "agent/tick"}, // restart-on-change's files, watched and hashed, opened as the log files are: regular files only
	"agent/images":           {"agent/events", "agent/eviction", "agent/podspec", "agent/status"},
	"agent/lifecycle":        {"agent/events", "agent/podspec", "agent/prober"},
	"agent/manifest":         {"agent/objects", "agent/poddir", "agent/podspec"},
	"agent/objects":          nil,
	"agent/mirror":           {"agent", "agent/atomicfile", "agent/events", "agent/host", "agent/manifest", "agent/mirror/certificate", "agent/status"},
	"agent/poddir":           nil,
	"agent/podspec":          nil,
	"agent/podspec/logfiles": nil,
	"agent/prober":           {"agent/podspec"},
	"agent/ready":            {"agent/health", "agent/prober", "agent/status"},
	// agent/mirror/certificate is client-go's certificate manager, copied to
	// take a client of CSRs alone: it imports no agent package.
	"agent/mirror/certificate": nil,
	// agent/rollout keeps each pod name's generations, written as every
	// record the daemon relies on after a restart.
	"agent/rollout": {"agent/atomicfile"},
	// agent/server finds the pod and container of staticpodd exec's one
	// request as the CLI names them (agent/describe), and its metrics read
	// the status manager's pods through agent/status' Figures, not a copy.
	"agent/server": {
		"agent/atomicfile", "agent/describe", "agent/events", "agent/histogram", "agent/manifest", "agent/podspec",
		"agent/podspec/logfiles", "agent/prober", "agent/rollout", "agent/status",
	},
	"agent/source": {"agent/atomicfile", "agent/filestamp", "agent/manifest", "agent/objects", "agent/podspec", "agent/tick"},
	"agent/status": {"agent/manifest", "agent/podspec"},
	// agent/tick is the one clock the periodic work ticks on, so that an
	// idle daemon's periods wake it together.
	"agent/tick": nil,
	"agent/trim": {"agent/events"},
	// agent/volumes does on the host what agent/manifest decides, in the
	// directories agent/poddir names; only the agent calls it.
	"agent/volumes": {"agent/atomicdir", "agent/manifest", "agent/poddir"},
}

// TestAgentEdges holds the imports between agent/ packages to agentEdges.
func TestAgentEdges(t *testing.T) {
	const mod = "github.com/staticpodd/staticpodd/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../agent/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{} // "from to", and "from" for each package
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from := strings.TrimPrefix(f[0], mod)
		seen[from] = true
		pkgs++
		allowed, ok := agentEdges[from]
		if !ok {
			t.Errorf("%s is a new agent package: add it to agentEdges in tests/deps_test.go with the agent packages it imports", from)
			continue
		}
		for _, imp := range f[1:] {
			to, ok := strings.CutPrefix(imp, mod)
			if !ok || (to != "agent" && !strings.HasPrefix(to, "agent/")) {
				continue
			}
			seen[from+" "+to] = true
			if !slices.Contains(allowed, to) {
				t.Errorf("%s imports %s, a new edge between agent packages: if it is meant, add it to agentEdges in tests/deps_test.go", from, to)
			}
		}
	}
	if pkgs < 10 {
		t.Fatalf("go list named %d agent packages: not agent/...", pkgs)
	}
	for from, tos := range agentEdges {
		if !seen[from] {
			t.Errorf("%s is gone: remove it from agentEdges in tests/deps_test.go", from)
			continue
		}
		for _, to := range tos {
			if !seen[from+" "+to] {
				t.Errorf("%s no longer imports %s: remove the edge from agentEdges in tests/deps_test.go", from, to)
			}
		}
	}
}

// hostIO are the packages that reach the host: its files, processes, kernel
// and network. (net/netip and net/url are values and stay allowed.)
var hostIO = []string{"os", "os/exec", "os/signal", "os/user", "syscall", "golang.org/x/sys/unix", "net", "net/http"}

// purePackages decide from values alone and may not import hostIO directly,
// so that table tests cover all they do and a decision never hides a side
// effect: the caller reads the host and acts on the answer.
var purePackages = map[string]string{
	"agent/describe": "pods, their events and probes as the CLI prints them (ps POD, describe, events, completion)",
	"agent/eviction": "which signal crossed which threshold, and which pod goes first",
	"agent/manifest": "parsing, naming, UIDs, hashes, defaults, validation, QoS, conversion to podspec",
	"agent/objects":  "ConfigMaps and Secrets beside the pods: reading, validation, the set of them, what a pod gets of them",
	"agent/poddir":   "the names of every path under <root-dir>/pods",
	"agent/status":   "a pod's v1.PodStatus from what its worker knows (Generate), what it says of the pod (Classify), its one cache (Manager)",
}

// pureFiles are pure code still inside package agent, held to the same rule
// file by file until they become packages of their own (the pod worker's
// phases, docs/architecture.md).
var pureFiles = map[string]string{
	"agent/plan.go": "plan(desired, actual): the actions that bring a pod to its manifest",
}

// TestPurePackages holds purePackages and pureFiles to imports that cannot
// reach the host.
func TestPurePackages(t *testing.T) {
	const mod = "github.com/staticpodd/staticpodd/"
	check := func(what string, imports []string) {
		t.Helper()
		for _, imp := range imports {
			if slices.Contains(hostIO, imp) {
				t.Errorf("%s imports %s: it is pure (purePackages, pureFiles in tests/deps_test.go); "+
					"read the host in the caller and pass the values in", what, imp)
			}
		}
	}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}
	for p := range purePackages {
		args = append(args, "../"+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	listed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		check(strings.TrimPrefix(f[0], mod), f[1:])
		listed++
	}
	if listed != len(purePackages) {
		t.Fatalf("go list named %d packages for %d pure ones", listed, len(purePackages))
	}
	for name := range pureFiles {
		f, err := parser.ParseFile(token.NewFileSet(), "../"+name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		var imports []string
		for _, s := range f.Imports {
			imports = append(imports, strings.Trim(s.Path.Value, `"`))
		}
		if len(imports) == 0 {
			t.Fatalf("%s imports nothing: not the file it was", name)
		}
		check(name, imports)
	}
}

// cmdMaxLines caps the non-test Go lines of cmd/staticpodd, which should only
// parse flags, call the wiring (package daemon) and print. It held 3,996
// lines when the cap was set, about 1,950 of them daemon behaviour by issue
// 25's count; once point 3 moved that behaviour into its packages (the source
// mux to agent/source, part health to agent/health, the readiness gate to
// agent/ready, the memory trim to agent/trim, the wiring, reload and the image
// GC loop to daemon), it held 2,363, and the cap was that plus a small margin
// (2,450). Issue 28's verbs added three commands that only wire, their logic
// in agent/rollout, agent and daemon: rollout history|status|undo (83 lines),
// debug (59) and restart (50), to 2,600; the cap is that plus the same margin.
// Issue 30 only wires too (its logic in daemon/imagepolicy.go, daemon/bundle.go,
// oci/bundle and oci/image/policy): --image-policy for images import, pull,
// validate and check, images ls's VERIFICATION column, and bundle
// create|apply|status and images sign; the cap is what that measures plus
// the margin.
const cmdMaxLines = 2900

// TestCmdSize keeps daemon behaviour from growing in package main.
func TestCmdSize(t *testing.T) {
	lines, counted := 0, 0
	err := filepath.WalkDir("../cmd/staticpodd", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "testdata":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		lines += bytes.Count(b, []byte("\n"))
		counted++
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if counted < 5 {
		t.Fatalf("found %d Go files in cmd/staticpodd", counted)
	}
	t.Logf("cmd/staticpodd: %d lines in %d files (cap %d)", lines, counted, cmdMaxLines)
	if lines > cmdMaxLines {
		t.Errorf("cmd/staticpodd has %d lines of Go, more than cmdMaxLines (%d): it only wires; "+
			"put the behaviour in the package that owns it", lines, cmdMaxLines)
	}
}

// clientGoOutsideMirror are the client-go packages that agent/ packages other
// than agent/mirror may link, and why. The fence is by package, not module: a
// small package that agent/mirror already links into the binary costs nothing
// more outside it, and a hand copy of it is one more thing to keep in step. Each
// must stay linked by the daemon and must not link, even indirectly, a
// client-go package outside this list, so nothing that talks to an API server
// (apiServerClients) can arrive through one (TestClientGoFence).
//
// The image pull back-off (agent/images) is flowcontrol.Backoff itself.
// agent/backoff.go, the crash-loop back-off, is still a hand copy: it renews
// an entry at the exit a restart follows, where the kubelet's doBackOff renews
// it at the restart (Next stamps Clock.Now()), so its 10-minute reset counts
// the back-off wait as well as the run; moving it onto flowcontrol changes when
// a crash loop starts over, which is a change of behaviour to decide on its
// own. agent/events, the one event correlator, aggregates and counts as
// tools/record's EventCorrelator does, written out: tools/record imports
// k8s.io/client-go/rest (and through it transport), so it is not on this list;
// agent/mirror posts what agent/events made and runs no correlator of its own.
var clientGoOutsideMirror = map[string]string{
	"k8s.io/client-go/util/flowcontrol": "the kubelet's back-off (flowcontrol.Backoff); standard library, " +
		"golang.org/x/time/rate and k8s.io/utils/clock only",
}

// apiServerClients are the client-go packages (and those below them) that
// reach an API server or load a kubeconfig, or import one that does
// (tools/record imports rest): only agent/mirror may link them.
var apiServerClients = []string{
	"k8s.io/client-go/rest",
	"k8s.io/client-go/transport",
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/dynamic",
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/metadata",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/listers",
	"k8s.io/client-go/tools/cache",
	"k8s.io/client-go/tools/clientcmd",
	"k8s.io/client-go/tools/record",
}

func apiServerClient(pkg string) bool {
	for _, c := range apiServerClients {
		if pkg == c || strings.HasPrefix(pkg, c+"/") {
			return true
		}
	}
	return false
}

// TestClientGoFence keeps clientGoOutsideMirror honest: each package on it is
// already linked into the daemon (allowing it grows nothing), and all it links
// of client-go is on the list too, so none of apiServerClients comes with it.
func TestClientGoFence(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "netgo osusergo grpcnotrace seccomp", "../cmd/staticpodd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		linked[p] = true
	}
	if len(linked) < 100 {
		t.Fatalf("go list named %d packages: not the binary's", len(linked))
	}
	allowed := make([]string, 0, len(clientGoOutsideMirror))
	for p := range clientGoOutsideMirror {
		allowed = append(allowed, p)
		if !linked[p] {
			t.Errorf("%s is on clientGoOutsideMirror but the daemon does not link it: allowing it outside "+
				"agent/mirror would grow the binary; measure that first, or take it off the list", p)
		}
	}
	out, err = exec.Command("go", append([]string{"list", "-deps"}, allowed...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", allowed, err)
	}
	for _, d := range strings.Fields(string(out)) {
		if !strings.HasPrefix(d, "k8s.io/client-go/") {
			continue
		}
		if apiServerClient(d) {
			t.Errorf("clientGoOutsideMirror links %s, which talks to an API server: only agent/mirror may", d)
		} else if clientGoOutsideMirror[d] == "" {
			t.Errorf("clientGoOutsideMirror links %s, which is not on it: add it with its reason, or take off what links it", d)
		}
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
	"k8s.io/kubelet", // stats/v1alpha1 and pkg/apis (well-known labels) only; never config/v1beta1 (heavyModules)
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
	// The CRI socket (agent/cri): gRPC and the CRI's generated types, and
	// the kubelet's and containerd's exec streaming server with what it
	// links: 36 package inits, 0.63 ms and 281 KB of every re-exec's
	// start-up (measured as above), 3.4 MB of the binary.
	"google.golang.org/grpc",
	"google.golang.org/genproto/googleapis/rpc",
	"k8s.io/cri-api",
	"k8s.io/cri-streaming",
	"k8s.io/streaming",
	"github.com/emicklei/go-restful/v3",
	"github.com/moby/spdystream",
	// The pod network: libcni (7 package inits, 0.02 ms and 5 KB of every
	// re-exec's start-up, measured as above).
	"github.com/containernetworking/cni",
	// Linked since TLS bootstrap by client-go's typed clients (gentype
	// links client-go/testing: json-patch; tools/cache: go-difflib) and
	// kube-openapi's handler: 3 package inits, 0.03 ms together (the
	// typed clientset's scheme, 3.0 ms, is the cost; see heavyPackages).
	"github.com/emicklei/go-restful/v3",
	"github.com/pmezard/go-difflib",
	// The CLI's progress bar for pulls, imports and exports (oci/image/bar):
	// 2 package inits with init work, 0.04 ms and 24 KB of every re-exec's
	// start-up (progressbar's and colorstring's regexps; uniseg's tables
	// are static data), measured as above.
	"github.com/schollz/progressbar/v3",
	"github.com/mitchellh/colorstring",
	"github.com/rivo/uniseg",
	// Image signatures (oci/image/policy): sigstore-go's verifier and
	// what it links (Rekor's and the timestamp authority's generated
	// types, go-openapi, protobuf-specs, in-toto, OpenTelemetry through
	// go-openapi's client): 94 more package inits, 3 ms and 1.5 MB of
	// every re-exec's start-up, 4.9 MB of the stripped binary
	// (GODEBUG=inittrace=1 staticpodd version, 3 runs alternating with and
	// without). Containers do not pay it: they run the monitor's own
	// program. Not sigstore-go's signer (pkg/sign), whose Fulcio, Rekor
	// and timestamp clients brought OpenID Connect, go-jose, TUF, relic,
	// minisign and retryablehttp for nothing a key signs: 17 package
	// inits and 0.81 MB fewer without it (oci/image/policy/sign).
	"go.opentelemetry.io/otel",
	// IsEmail alone, go.mod replacing the module with third_party/govalidator:
	// the original compiled 40-odd regular expressions at init (0.95 MB).
	"github.com/asaskevich/govalidator",
	"github.com/blang/semver",
	"github.com/cenkalti/backoff/v5",
	"github.com/cyberphone/json-canonicalization",
	"github.com/digitorus/pkcs7",
	"github.com/digitorus/timestamp",
	"github.com/go-logr/stdr",
	"github.com/go-openapi/analysis",
	"github.com/go-openapi/errors",
	"github.com/go-openapi/loads",
	"github.com/go-openapi/runtime",
	"github.com/go-openapi/runtime/server-middleware",
	"github.com/go-openapi/spec",
	"github.com/go-openapi/strfmt",
	"github.com/go-openapi/validate",
	"github.com/go-viper/mapstructure/v2",
	"github.com/google/certificate-transparency-go",
	"github.com/grpc-ecosystem/grpc-gateway/v2",
	"github.com/in-toto/attestation",
	"github.com/in-toto/in-toto-golang",
	"github.com/oklog/ulid/v2",
	"github.com/pkg/errors",
	"github.com/secure-systems-lab/go-securesystemslib",
	"github.com/shibumi/go-pathspec",
	"github.com/sigstore/protobuf-specs",
	"github.com/sigstore/rekor",
	"github.com/sigstore/rekor-tiles/v2",
	"github.com/sigstore/sigstore",
	"github.com/sigstore/sigstore-go",
	"github.com/sigstore/timestamp-authority/v2",
	"github.com/theupdateframework/go-tuf/v2",
	"github.com/transparency-dev/formats",
	"github.com/transparency-dev/merkle",
	"github.com/youmark/pkcs8",
	"go.opentelemetry.io/auto/sdk",
	"go.opentelemetry.io/otel/metric",
	"go.opentelemetry.io/otel/trace",
	"golang.org/x/crypto",
	"golang.org/x/mod",
	"google.golang.org/genproto/googleapis/api",
}

// heavyModules must not be linked into the binary, and why.
var heavyModules = map[string]string{
	"k8s.io/component-base": "k8s.io/kubelet/config/v1beta1 pulls it (and prometheus, OpenTelemetry) in; " +
		"agent/config decodes into its generated copy of the kubelet's types instead",
}

// heavyPackages must not be linked into the binary, and why.
var heavyPackages = map[string]string{
	"k8s.io/client-go/kubernetes": "the clientset links a typed client of every API group, and through them " +
		"kubernetes/scheme, which registers every group at init in every process of the binary; " +
		"agent/mirror/certificate is client-go's certificate manager on a client of CSRs alone (docs/benchmarks.md)",
	"k8s.io/client-go/kubernetes/scheme": "registers every API group at init (see k8s.io/client-go/kubernetes)",
	"golang.org/x/net/trace": "gRPC's request tracing (the release build's grpcnotrace tag leaves it out): " +
		"its html/template executes templates, so the linker keeps every exported method of every type " +
		"in case a template calls it by name, 15 MB of the binary (docs/benchmarks.md, \"Binary size\")",
}

// TestDaemonPackages keeps heavyPackages out of the binary.
func TestDaemonPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "netgo osusergo grpcnotrace seccomp", "../cmd/staticpodd").Output()
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
	out, err := exec.Command("go", "list", "-deps", "-tags", "netgo osusergo grpcnotrace seccomp",
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
	// The cgroup v1 mounts the daemon hands each monitor, seeded into
	// libcontainer's cache.
	"github.com/staticpodd/staticpodd/oci/cgroupv1mounts",
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
		args := append([]string{"list", "-deps", "-tags", "netgo osusergo grpcnotrace seccomp",
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
