// Command floor starts the container of an OCI bundle with libcontainer in
// process, as staticpodd's monitor does, and nothing else: no daemon, no
// manifest, no image store. It is the floor of start latency for a design
// built on libcontainer: `floor ROOT BUNDLE ID` creates container ID under
// the libcontainer state dir ROOT, runs it, waits for it to exit and
// destroys it.
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
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(root, bundle, id string) error {
	raw, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return err
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	spec.Root.Path = filepath.Join(bundle, spec.Root.Path)
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{CgroupName: id, Spec: &spec})
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
