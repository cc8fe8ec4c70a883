package hostile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
)

// corpusCase is one hostile manifest as bytes: what a file in the manifest
// directory holds in TestHostileManifests, and what the URL serves to the URL
// source in TestHostileURLAnswers, with the same expectations (but for the
// few that hostileURLAnswers says differ from a URL).
type corpusCase struct {
	name string
	file string // its name in the manifest directory
	body func() []byte
	// problem is a regexp the daemon's problem for it and validate's error
	// must match; "" for a manifest that is usable, whose pod runs.
	problem string
	// runs, for a usable manifest, is the pod's name; warning a regexp its
	// warning in the daemon's log matches.
	runs, warning string
}

func text(s string) func() []byte { return func() []byte { return []byte(s) } }

// pod is a manifest of a pod named name that runs until stopped, with more
// lines in its spec (indented two spaces) and in its container (six).
func pod(name, spec, container string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
%s  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
%s`, name, spec, container)
}

// noise is n bytes that are the same on every run.
func noise(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// billionLaughs is the classic entity-expansion bomb in YAML anchors: nine
// levels of nine aliases, a billion "lol"s if expanded.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(p+", ", 8)+p)
	}
	return b.String()
}

// mergeBomb is billionLaughs made of merge keys: each level merges the one
// below nine times.
func mergeBomb() string {
	var b strings.Builder
	b.WriteString("m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9}\n")
	for i := 1; i <= 9; i++ {
		p := fmt.Sprintf("*m%d", i-1)
		fmt.Fprintf(&b, "m%d: &m%d {<<: [%s], k%d: 1}\n", i, i, strings.Repeat(p+", ", 8)+p, i)
	}
	return b.String()
}

const notYAML = `not YAML or JSON`

// hostileCorpus is every hostile manifest that is only bytes.
func hostileCorpus() []corpusCase {
	big := func(n int, head string, fill byte, tail string) func() []byte {
		return func() []byte {
			b := make([]byte, 0, n)
			b = append(b, head...)
			b = append(b, bytes.Repeat([]byte{fill}, n-len(head)-len(tail))...)
			return append(b, tail...)
		}
	}
	const mib = 1 << 20
	return []corpusCase{
		// Size first, while the daemon is at its idle size: a file over the
		// limit is refused from its size, unread.
		{name: "huge/50MiB-string", file: "huge50.yaml", body: big(50*mib, pod("huge", "", "    env:\n    - {name: PAD, value: \""), 'x', "\"}\n"), problem: `larger than 10485760 bytes`},
		{name: "huge/50MiB-binary", file: "huge50.bin", body: func() []byte { return noise(50*mib, 50) }, problem: `larger than 10485760 bytes`},
		{name: "huge/50MiB-one-line", file: "huge50.json", body: big(50*mib, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`, 'a', `"}}`), problem: `larger than 10485760 bytes`},
		{name: "huge/100MiB", file: "huge100.yaml", body: big(100*mib, pod("huge", "", "    env:\n    - {name: PAD, value: \""), 'x', "\"}\n"), problem: `larger than 10485760 bytes`},
		// Expansion bombs.
		{name: "yaml-bomb/billion-laughs", file: "bomb.yaml", body: text(billionLaughs()), problem: `excessive aliasing`},
		{name: "yaml-bomb/merge-keys", file: "merge.yaml", body: text(mergeBomb()), problem: `excessive aliasing|expand it to more than`},
		{name: "yaml-bomb/alias-amplification", file: "amplified.yaml", body: func() []byte {
			var b strings.Builder
			b.WriteString(pod("amplified", "", ""))
			fmt.Fprintf(&b, "  zz0: &big %q\n", strings.Repeat("x", mib))
			fmt.Fprintf(&b, "  zz1: [%s*big]\n", strings.Repeat("*big, ", 63))
			return []byte(b.String())
		}, problem: `YAML aliases expand it to more than 10485760 bytes`},
		// Depth.
		{name: "deep-nesting/10000-json", file: "deep10k.json", body: text(strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)), problem: `apiVersion: Required value`},
		{name: "deep-nesting/10000-in-a-pod", file: "deep10k.yaml", body: text(pod("deep", "  x: "+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+"\n", "")), problem: `exceeded max depth`},
		{name: "deep-nesting/yaml-flow", file: "deep.yaml", body: text(strings.Repeat("[", 4<<20) + strings.Repeat("]", 4<<20)), problem: `exceeded max depth`},
		{name: "deep-nesting/json", file: "deep.json", body: text(strings.Repeat(`{"a":`, 1<<20) + "1" + strings.Repeat("}", 1<<20)), problem: `exceeded max depth`},
		{name: "deep-nesting/block-maps", file: "deepmap.yaml", body: func() []byte {
			// Indentation makes depth cost its square in bytes: 4000 levels
			// fit under the 10 MiB limit.
			var b strings.Builder
			for i := range 4000 {
				fmt.Fprintf(&b, "%sa:\n", strings.Repeat(" ", i))
			}
			return []byte(b.String())
		}, problem: `apiVersion: Required value`},
		// Not text, not UTF-8.
		{name: "binary/nul-bytes", file: "nul.yaml", body: text(strings.Repeat("\x00", 4096)), problem: notYAML},
		{name: "binary/random", file: "random.yaml", body: func() []byte { return noise(64<<10, 1) }, problem: notYAML},
		{name: "binary/elf-header", file: "elf.yaml", body: func() []byte { return append([]byte("\x7fELF\x02\x01\x01\x00"), noise(8192, 2)...) }, problem: notYAML},
		{name: "non-utf8/latin1-name", file: "latin1.yaml", body: text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: caf\xe9\n"), problem: `UTF-8`},
		{name: "non-utf8/in-a-command", file: "badutf8.yaml", body: text(pod("badutf8", "", "    args: [\"\xff\xfe\xfd\"]\n")), problem: `UTF-8`},
		{name: "non-utf8/utf16-without-bom", file: "utf16.yaml", body: func() []byte { return utf16LE(pod("utf16", "", "")) }, problem: notYAML},
		{name: "empty/zero-bytes", file: "empty.yaml", body: text(""), problem: `empty manifest`},
		{name: "empty/whitespace", file: "blank.yaml", body: text("\n \n\t\n"), problem: `empty manifest`},
		{name: "not-an-object/list", file: "list.yaml", body: text("- apiVersion: v1\n- kind: Pod\n"), problem: `not a Kubernetes object: the document is a list`},
		{name: "not-an-object/null", file: "null.yaml", body: text("~\n"), problem: `not a Kubernetes object: the document is null`},
		{name: "yaml/duplicate-key", file: "dupkey.yaml", body: text(strings.Replace(pod("dupkey", "", ""), "  name: dupkey\n", "  name: dupkey\n  name: other\n", 1)),
			runs: "other", warning: `key \\"name\\" already set in map; the last one is used`},
		// Not a Pod.
		{name: "kind/service", file: "service.yaml", body: text(strings.Replace(pod("svc", "", ""), "kind: Pod", "kind: Service", 1)), problem: `kind: Unsupported value: "Service": supported values: "Pod"`},
		{name: "kind/apps-v1", file: "appsv1.yaml", body: text(strings.Replace(pod("apps", "", ""), "apiVersion: v1", "apiVersion: apps/v1", 1)), problem: `apiVersion: Unsupported value: "apps/v1": supported values: "v1"`},
		{name: "kind/podlist-in-a-file", file: "podlist.yaml", body: text("apiVersion: v1\nkind: PodList\nitems: []\n"), problem: `kind: Unsupported value: "PodList"`},
		{name: "kind/none", file: "nokind.yaml", body: text("metadata: {name: x}\n"), problem: `apiVersion: Required value.*\n?.*kind: Required value|apiVersion: Required value`},
		// Numbers.
		{name: "numbers/huge-integer", file: "hugeint.yaml", body: text(pod("hugeint", "", "    ports: [{containerPort: 99999999999999999999999999}]\n")), problem: `spec.containers\[0\].ports\[0\].containerPort: Invalid value: 1e\+26: must be a whole number`},
		{name: "numbers/grace-beyond-a-duration", file: "longgrace.yaml", body: text(strings.Replace(pod("longgrace", "", ""), "terminationGracePeriodSeconds: 2", "terminationGracePeriodSeconds: 9223372036854775807", 1)), problem: `spec.terminationGracePeriodSeconds: Invalid value: 9223372036854775807: must be from 0 to 9223372036`},
		{name: "numbers/memory-1e1000000", file: "hugemem.yaml", body: text(pod("hugemem", "", "    resources: {limits: {memory: 1e1000000}}\n")), problem: `limits\[memory\]: Invalid value: "10e999999": must be at most`},
		{name: "numbers/uid-beyond-32-bits", file: "biguid.yaml", body: text(pod("biguid", "  securityContext: {runAsUser: 4294967296}\n", "")), problem: `spec.securityContext.runAsUser: Invalid value: 4294967296`},
		{name: "numbers/quantity-garbage", file: "megs.yaml", body: text(pod("megs", "", "    resources: {limits: {memory: 32Megs}}\n")), problem: `limits\[memory\]: Invalid value: "32Megs": quantities must match`},
		{name: "grace/negative-probe", file: "negprobe.yaml", body: text(pod("negprobe", "", "    livenessProbe: {exec: {command: [\"true\"]}, terminationGracePeriodSeconds: -1}\n")), problem: `livenessProbe.terminationGracePeriodSeconds: Invalid value: -1`},
		{name: "grace/negative-pod", file: "neggrace.yaml", body: text(strings.Replace(pod("neggrace", "", ""), "terminationGracePeriodSeconds: 2", "terminationGracePeriodSeconds: -30", 1)),
			runs: "neggrace", warning: `spec.terminationGracePeriodSeconds.*treated as 1`},
		// Names and paths.
		{name: "names/300-characters", file: "longname.yaml", body: text(pod(strings.Repeat("n", 300), "", "")), problem: `metadata.name: .*must be no more than 253 characters`},
		{name: "names/300-character-container", file: "longctr.yaml", body: text(strings.Replace(pod("longctr", "", ""), "name: main", "name: "+strings.Repeat("c", 300), 1)), problem: `spec.containers\[0\].name: .*must be no more than 63 characters`},
		{name: "names/dotdot", file: "dotdot.yaml", body: text(pod("..", "", "")), problem: `metadata.name: Invalid value: "..-`},
		{name: "names/dotdot-namespace", file: "dotdotns.yaml", body: text(strings.Replace(pod("dotdotns", "", ""), "  name: dotdotns\n", "  name: dotdotns\n  namespace: ../kube-system\n", 1)), problem: `metadata.namespace: Invalid value: "../kube-system"`},
		{name: "names/dotdot-uid", file: "dotdotuid.yaml", body: text(strings.Replace(pod("dotdotuid", "", ""), "  name: dotdotuid\n", "  name: dotdotuid\n  uid: ../../../etc\n", 1)), problem: `metadata.uid: Invalid value: "../../../etc"`},
		{name: "names/escape-sequences", file: "ansi.yaml", body: text(pod("\"x\\e[2J\\nlevel=ERROR msg=forged\"", "", "")), problem: `metadata.name: Invalid value: "x\\x1b\[2J\\nlevel=ERROR msg=forged`},
		{name: "paths/dotdot-hostPath", file: "hostpath.yaml", body: text(pod("hostpath", "  volumes: [{name: v, hostPath: {path: /etc/kubernetes/../../root}}]\n", "    volumeMounts: [{name: v, mountPath: /v}]\n")), problem: `spec.volumes\[0\].hostPath.path: Invalid value: "/etc/kubernetes/../../root": must not contain '..'`},
		{name: "paths/relative-hostPath", file: "relpath.yaml", body: text(pod("relpath", "  volumes: [{name: v, hostPath: {path: etc/shadow}}]\n", "    volumeMounts: [{name: v, mountPath: /v}]\n")), problem: `hostPath.path: Invalid value: "etc/shadow": must be an absolute path`},
		{name: "paths/dotdot-subPath", file: "subpath.yaml", body: text(pod("subpath", "  volumes: [{name: v, emptyDir: {}}]\n", "    volumeMounts: [{name: v, mountPath: /v, subPath: ../../etc}]\n")), problem: `volumeMounts\[0\].subPath: Invalid value: "../../etc"`},
		{name: "paths/dotdot-image", file: "image.yaml", body: text(strings.Replace(pod("image", "", ""), "image: busybox", "image: '../../etc:x'", 1)), problem: `image: Invalid value: "../../etc:x": not an image reference`},
		// Duplicates.
		{name: "duplicates/container-names", file: "dupctr.yaml", body: text(pod("dupctr", "", "  - {name: main, image: busybox}\n")), problem: `spec.containers\[1\].name: Duplicate value: "main"`},
		{name: "duplicates/volume-names", file: "dupvol.yaml", body: text(pod("dupvol", "  volumes: [{name: v, emptyDir: {}}, {name: v, emptyDir: {}}]\n", "")), problem: `spec.volumes\[1\].name: Duplicate value: "v"`},
		// Needs a cluster.
		{name: "cluster/service-account", file: "serviceaccount.yaml", body: text(pod("serviceaccount", "  serviceAccountName: admin\n", "")), problem: `spec.serviceAccountName: Forbidden`},
		{name: "cluster/service-account-token", file: "satoken.yaml", body: text(pod("satoken", "  volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t}}]}}]\n", "")), problem: `spec.volumes\[0\].projected.sources\[0\].serviceAccountToken: Forbidden`},
		// Last: the largest file that is parsed, whose memory the daemon keeps
		// for a while after.
		{name: "huge/just-under-the-limit", file: "under.yaml", body: big(10*mib-100, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: under\n  annotations:\n    pad: \"", 'x', "\"\nspec:\n  containers: [{name: c, image: busybox}]\n"), problem: `metadata.annotations: Too long: may not be more than 262144 bytes`},
	}
}

func utf16LE(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}
