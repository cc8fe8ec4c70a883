package chaos

import (
	"fmt"
	"strings"
)

// shape is what a chaos pod does.
type shape int

const (
	stable      shape = iota // one container that runs until told to stop
	logger                   // writes numbered lines, fast
	withInit                 // an init container, then a stable one
	withSidecar              // a sidecar (init container, restartPolicy Always) and a stable one
	probed                   // httpd with exec, HTTP and TCP probes that pass
	crashing                 // exits 3 after a moment, restarted with back-off
	exiting                  // exits 0 once, restartPolicy Never
	unhealthy                // its liveness probe fails after a few seconds
	numShapes
)

var shapeNames = [...]string{"stable", "logger", "init", "sidecar", "probed", "crash", "exit", "unhealthy"}

func (s shape) String() string { return shapeNames[s] }

// crashCode is the exit code of a crashing container.
const crashCode = 3

// spec is one logical chaos pod: its manifest name, shape, where it comes
// from and its generation (an edit bumps it, which changes its UID).
type spec struct {
	name        string
	shape       shape
	hostNetwork bool
	url         bool // served by the URL source, not a file
	critical    bool // priorityClassName system-node-critical: never evicted
	gen         int
	present     bool
	marks       string       // host dir mounted at /s
	rate        int          // logger: lines of 100 bytes per 0.1 s
	added       map[int]bool // generations added so far

	// rollbackAfter: the pod has staticpodd.io/rollback-after, and only
	// the rollout fault edits it. bad holds its generations that are never
	// Ready, and how; running is the generation that runs, which is not gen
	// while gen was rolled back.
	rollbackAfter bool
	bad           map[int]badness
	running       int
	// after is the pod named by its staticpodd.io/start-after, whose marks
	// dir it sees at /dep; readyMark: its readiness probe appends its
	// generation to /s/ready each time it passes, so that its dependents
	// can tell.
	after     *spec
	readyMark bool
	// onChange is a host file named by its staticpodd.io/restart-on-change:
	// a change of its contents is a new generation.
	onChange string
}

// badness is how a generation of a pod with rollback-after is never Ready.
type badness int

const (
	good       badness = iota
	exitsNow           // its container exits crashCode at once, restarted with back-off
	neverReady         // it runs, but its readiness probe never passes
)

// runningGen is the generation that runs while the manifest is present.
func (p *spec) runningGen() int {
	if p.running != 0 {
		return p.running
	}
	return p.gen
}

// waitsOn reports whether a pod p starts after, directly or not, is absent:
// then p may wait forever.
func (p *spec) waitsOn() bool {
	for d := p.after; d != nil; d = d.after {
		if !d.present {
			return true
		}
	}
	return false
}

// rollbackAfter is the chaos pods' staticpodd.io/rollback-after, the
// shortest the daemon takes.
const rollbackAfter = "5s"

// depsFile, in a dependent's marks, has a line per run of its container:
// its UID and generation, the run's number in that UID's life (its start
// marks so far), how many seconds before the run the probe of the pod it
// starts after last passed (the mtime of that pod's /s/ready), and the
// highest generation of that pod whose probe had passed by then.
const depsFile = "deps"

// kept reports whether a container of this shape stays up unless killed:
// any restart of it must be a monitor the soak killed.
func (s shape) kept(container string) bool {
	switch s {
	case stable, logger, withInit, withSidecar, probed:
		return container != "init"
	}
	return false
}

// markCmd appends "start <uid>" to /s/<container>.marks: one line per run.
const markCmd = `echo "start $POD_UID" >> /s/$CHAOS_CONTAINER.marks; `

// idle runs until SIGTERM.
const idle = `while true; do sleep 1 & wait $!; done`

func env(p *spec, container string) string {
	return fmt.Sprintf(`    env:
    - {name: CHAOS_POD, value: %s}
    - {name: CHAOS_GEN, value: "%d"}
    - {name: CHAOS_CONTAINER, value: %s}
    - name: POD_UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    volumeMounts:
    - {name: s, mountPath: /s}
`, p.name, p.gen, container)
}

// container is a container that runs cmd. Its shell sets its SIGTERM trap
// first, so that a stop however early ends it with the code of its shape.
func container(p *spec, name, cmd, extra string) string {
	code := 0
	if p.shape == crashing || p.bad[p.gen] == exitsNow {
		code = crashCode
	}
	cmd = fmt.Sprintf("trap 'exit %d' TERM; ", code) + markCmd + cmd
	return fmt.Sprintf("  - name: %s\n    image: busybox\n    command: [\"sh\", \"-c\", %q]\n%s%s", name, cmd, env(p, name), extra)
}

// manifest is the pod's YAML: one document, or a PodList item when list.
func (p *spec) manifest() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n", p.name)
	if p.rollbackAfter || p.after != nil || p.onChange != "" {
		b.WriteString("  annotations:\n")
		if p.onChange != "" {
			fmt.Fprintf(&b, "    staticpodd.io/restart-on-change: %s\n", p.onChange)
		}
		if p.rollbackAfter {
			fmt.Fprintf(&b, "    staticpodd.io/rollback-after: %s\n", rollbackAfter)
		}
		if p.after != nil {
			fmt.Fprintf(&b, "    staticpodd.io/start-after: %s\n", p.after.name)
		}
	}
	b.WriteString("spec:\n  terminationGracePeriodSeconds: 2\n")
	if p.critical {
		// As kubeadm's control plane: the priority too, which an API
		// server's admission would resolve from the class for a mirror pod.
		b.WriteString("  priorityClassName: system-node-critical\n  priority: 2000001000\n")
	}
	if p.hostNetwork {
		b.WriteString("  hostNetwork: true\n")
	}
	fmt.Fprintf(&b, "  volumes:\n  - name: s\n    hostPath: {path: %s}\n", p.marks)
	if p.after != nil {
		fmt.Fprintf(&b, "  - name: dep\n    hostPath: {path: %s}\n", p.after.marks)
	}
	switch {
	case p.bad[p.gen] == exitsNow:
		b.WriteString("  containers:\n" + container(p, "main", fmt.Sprintf("exit %d", crashCode), ""))
		return b.String()
	case p.bad[p.gen] == neverReady:
		probe := "    readinessProbe:\n      exec: {command: [\"false\"]}\n      periodSeconds: 1\n"
		b.WriteString("  containers:\n" + container(p, "main", idle, probe))
		return b.String()
	}
	switch p.shape {
	case stable:
		// extra continues the container's volumeMounts first.
		var extra, cmd string
		if p.after != nil {
			extra = "    - {name: dep, mountPath: /dep}\n"
			cmd = `g=$(sort -n /dep/ready 2>/dev/null | tail -1); ` +
				`echo "$POD_UID $CHAOS_GEN $(grep -c "start $POD_UID" /s/main.marks) $(( $(date +%s) - $(stat -c %Y /dep/ready 2>/dev/null || echo 0) )) ${g:-0}" >> /s/` + depsFile + "; "
		}
		if p.readyMark {
			extra += fmt.Sprintf("    readinessProbe:\n      exec: {command: [\"sh\", \"-c\", \"echo %d >> /s/ready\"]}\n      initialDelaySeconds: 1\n      periodSeconds: 1\n", p.gen)
		}
		b.WriteString("  containers:\n" + container(p, "main", cmd+idle, extra))
	case logger:
		// Batches of numbered lines of 100 bytes; after each batch the last
		// number goes to /s/progress-<uid>, so the checker knows what was
		// written. seq -s puts the padding after every number but the last.
		cmd := fmt.Sprintf(`n=0; pad=" %s
"; while true; do seq -s "$pad" $((n+1)) $((n+%d)); n=$((n+%d)); echo $n > /s/progress-$POD_UID; sleep 0.1 & wait $!; done`,
			strings.Repeat("x", 90), p.rate, p.rate)
		b.WriteString("  containers:\n" + container(p, "main", cmd, ""))
	case withInit:
		b.WriteString("  initContainers:\n" + container(p, "init", "exit 0", ""))
		b.WriteString("  containers:\n" + container(p, "main", idle, ""))
	case withSidecar:
		b.WriteString("  initContainers:\n" + container(p, "sidecar", idle, "    restartPolicy: Always\n"))
		b.WriteString("  containers:\n" + container(p, "main", idle, ""))
	case probed:
		probes := `    startupProbe:
      exec: {command: ["test", "-e", "/tmp/www/index.html"]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 2
      timeoutSeconds: 5
      failureThreshold: 3
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 2
`
		// Started on a full disk, its writable layer takes no file: it
		// tries again until there is room, as its startup probe waits.
		cmd := `until mkdir -p /tmp/www && echo ok > /tmp/www/index.html; do sleep 0.5 & wait $!; done; httpd -f -p 8080 -h /tmp/www & ` + idle
		b.WriteString("  containers:\n" + container(p, "web", cmd, probes))
	case crashing:
		b.WriteString("  containers:\n" + container(p, "main", fmt.Sprintf("sleep 1 & wait $!; exit %d", crashCode), ""))
	case exiting:
		b.WriteString("  restartPolicy: Never\n  containers:\n" + container(p, "main", "sleep 1 & wait $!; exit 0", ""))
	case unhealthy:
		probe := `    livenessProbe:
      exec: {command: ["test", "-e", "/tmp/ok"]}
      periodSeconds: 2
      failureThreshold: 1
`
		b.WriteString("  containers:\n" + container(p, "main", "touch /tmp/ok; (sleep 4; rm /tmp/ok) & "+idle, probe))
	}
	return b.String()
}

// podList is a PodList of the manifests of pods.
func podList(pods []*spec) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: PodList\nitems:\n")
	for _, p := range pods {
		doc := strings.TrimPrefix(p.manifest(), "apiVersion: v1\nkind: Pod\n")
		for i, line := range strings.Split(strings.TrimSuffix(doc, "\n"), "\n") {
			if i == 0 {
				b.WriteString("- " + line + "\n")
			} else {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	if len(pods) == 0 {
		return "apiVersion: v1\nkind: PodList\nitems: []\n"
	}
	return b.String()
}
