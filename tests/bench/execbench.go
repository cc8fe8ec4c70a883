package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// runExec measures `staticpodd exec` against `runc exec` alone.
func runExec(runs int, bin, image, runc, busybox string) error {
	if bin == "" || image == "" {
		return fmt.Errorf("need -staticpodd and -image (make bench sets both)")
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return printExec(runs, bin, image, runc, busybox, dir)
}

// printExec measures and prints benchExec.
func printExec(runs int, bin, image, runc, busybox, dir string) error {
	ourExec, theirExec, cpu, err := benchExec(runs, bin, image, runc, busybox, dir)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	ep50, ep90 := pct(ourExec, 50), pct(ourExec, 90)
	rp50, rp90 := pct(theirExec, 50), pct(theirExec, 90)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nexec of `true` in a running container, CLI start → CLI exit, %d runs each, alternating (loadavg %s)\n\n", runs, strings.TrimSpace(string(load)))
	fmt.Printf("| | p50 | p90 |\n|---|---|---|\n")
	fmt.Printf("| staticpodd exec POD -- true | %s | %s |\n", ms(ep50), ms(ep90))
	fmt.Printf("| runc exec ID true | %s | %s |\n", ms(rp50), ms(rp90))
	fmt.Printf("| ratio staticpodd / runc | %.2f | %.2f |\n", float64(ep50)/float64(rp50), float64(ep90)/float64(rp90))
	fmt.Printf("\nCPU per exec (user + system, with the processes each reaped; the daemon's in clock ticks of 10 ms, summed over the runs):\n\n")
	fmt.Printf("| staticpodd CLI | staticpodd daemon (exec server or helper, its init, `true`) | total | runc exec (its init, `true`) | ratio |\n|---|---|---|---|---|\n")
	fmt.Printf("| %s | %s | %s | %s | %.2f |\n", ms(cpu.cli), ms(cpu.daemon), ms(cpu.cli+cpu.daemon), ms(cpu.runc), float64(cpu.cli+cpu.daemon)/float64(cpu.runc))
	return nil
}

// benchExec times `staticpodd exec idle -- true` against `runc exec ID true`
// in an equivalent running container (busybox, host network, private PID,
// IPC, UTS and mount namespaces), each from the CLI's start to its exit,
// alternating the two sides and which goes first.
func benchExec(runs int, bin, image, runc, busybox, dir string) (ours, theirs []time.Duration, cpu execCPU, err error) {
	sub, err := os.MkdirTemp(dir, "staticpodd-bench-exec-")
	if err != nil {
		return nil, nil, cpu, err
	}
	d, err := startDaemon(bin, image, sub)
	if err != nil {
		return nil, nil, cpu, err
	}
	defer d.stop()
	defer d.removePods()
	tmp := filepath.Join(sub, "idle.yaml")
	os.WriteFile(tmp, []byte(`apiVersion: v1
kind: Pod
metadata: {name: idle}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}
`), 0o644)
	if err := os.Rename(tmp, filepath.Join(d.manifests, "idle.yaml")); err != nil {
		return nil, nil, cpu, err
	}
	ourExec := func() *exec.Cmd {
		return exec.Command(bin, append(append([]string{"exec"}, d.common...), "idle", "--", "true")...)
	}
	if err := poll(30*time.Second, func() bool { return ourExec().Run() == nil }); err != nil {
		return nil, nil, cpu, fmt.Errorf("idle pod never ran: %v\n%s", err, d.logs.String())
	}

	sig := filepath.Join(sub, "sig")
	os.MkdirAll(sig, 0o755)
	bundle, err := makeBundle(runc, busybox, sub, "bundle", []string{"sleep", "3600"}, sig)
	if err != nil {
		return nil, nil, cpu, err
	}
	state := filepath.Join("/run", filepath.Base(sub)+"-runc")
	defer os.RemoveAll(state)
	const id = "bench-exec"
	// No pipes: the detached container would hold them open.
	if err := runcCommand(runc, "--root", state, "run", "-d", "--bundle", bundle, id).Run(); err != nil {
		return nil, nil, cpu, fmt.Errorf("runc run: %v", err)
	}
	defer runcCommand(runc, "--root", state, "delete", "-f", id).Run()
	theirExec := func() *exec.Cmd { return runcCommand(runc, "--root", state, "exec", id, "true") }

	// CPU: each CLI's own, with what it reaped (runc's init and `true`),
	// and for ours the daemon's, with the exec helper it reaped (and the
	// helper's init and `true`), over the counted runs.
	var ourCPU, theirCPU, daemonCPU time.Duration
	timed := func(cmd *exec.Cmd, cpu *time.Duration) (time.Duration, error) {
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
		}
		*cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return time.Since(t0), nil
	}
	// The daemon, and its exec server (started by the first exec): an older
	// build's one-shot exec helpers are the daemon's reaped children.
	daemon := func() []int {
		return append([]int{d.cmd.Process.Pid}, slices.DeleteFunc(monitorPids(d.runDir), func(pid int) bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			return !bytes.HasPrefix(b, []byte("staticpodd-monitor\x00__staticpodd_exec\x00"))
		})...)
	}
	var d0 map[int]int64
	for i := 0; i < runs+1; i++ { // the first of each warms caches and is not counted
		if i == 1 {
			ourCPU, theirCPU, d0 = 0, 0, treeCPU(daemon())
		}
		sides := []func() error{
			func() error { t, err := timed(ourExec(), &ourCPU); ours = append(ours, t); return err },
			func() error { t, err := timed(theirExec(), &theirCPU); theirs = append(theirs, t); return err },
		}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return nil, nil, cpu, err
			}
		}
	}
	daemonCPU = cpuBetween(d0, treeCPU(daemon()))
	cpu = execCPU{cli: ourCPU / time.Duration(runs), daemon: daemonCPU / time.Duration(runs), runc: theirCPU / time.Duration(runs)}
	return ours[1:], theirs[1:], cpu, nil
}

// execCPU is the CPU an exec costs on average: our CLI, our daemon (with
// its exec server, or an older build's exec helper, and what that reaped), and runc exec (with its init and
// the command).
type execCPU struct{ cli, daemon, runc time.Duration }
