// Command floor starts the container of an OCI bundle with libcontainer in
// process, as staticpodd's monitor does, and nothing else: no daemon, no
// manifest, no image store. It is the floor of start latency for a design
// built on libcontainer: `floor [-systemd-cgroup] ROOT BUNDLE ID` creates
// container ID under the libcontainer state dir ROOT, runs it, waits for it
// to exit and destroys it. -systemd-cgroup puts it in a scope systemd makes
// over D-Bus (runc --systemd-cgroup's system.slice/runc-ID.scope), where
// the default is a cgroup it makes itself.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		libcontainer.Init() // the container's init re-exec; does not return
	}
	args, systemd := os.Args[1:], false
	if len(args) > 0 && args[0] == "-systemd-cgroup" {
		args, systemd = args[1:], true
	}
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: floor [-systemd-cgroup] ROOT BUNDLE ID")
		os.Exit(2)
	}
	if err := run(args[0], args[1], args[2], systemd); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(root, bundle, id string, systemd bool) error {
	raw, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return err
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	spec.Root.Path = filepath.Join(bundle, spec.Root.Path)
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{CgroupName: id, UseSystemdCgroup: systemd, Spec: &spec})
	if err != nil {
		return err
	}
	ctr, err := libcontainer.Create(root, id, cfg)
	if err != nil {
		return err
	}
	defer ctr.Destroy()
	proc := &libcontainer.Process{Args: spec.Process.Args, Env: spec.Process.Env, Cwd: spec.Process.Cwd, Init: true,
		Stdin: nil, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := ctr.Run(proc); err != nil {
		return err
	}
	_, err = proc.Wait()
	return err
}
