package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// testRoot is the root command with only the subcommands of this file's tests.
func testRoot(add ...func(*globalOptions) *cobra.Command) *cobra.Command {
	o := &globalOptions{}
	root := &cobra.Command{Use: "staticpodd", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&o.RootDir, "root-dir", "/var/lib/staticpodd", "")
	root.PersistentFlags().StringVar(&o.RunDir, "run-dir", "/run/staticpodd", "")
	for _, a := range add {
		root.AddCommand(a(o))
	}
	return root
}

func execute(t *testing.T, root *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

const seedConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "192.168.0.8"
port: 20250
serializeImagePulls: false
evictionHard:
    memory.available:  "200Mi"
staticPodPath: "/tmp/test_pod.yaml"
`

func TestConfigCommandShowsOrigins(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(seedConfig+"failSwapOn: false\nclusterDomain: example.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := testRoot(newConfigCmd)
	out, err := execute(t, root, "config", "--config", cfgPath, "--hostname-override", "Master", "--run-dir", "/tmp/run")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, out)
	}
	for _, want := range []string{
		"staticPodPath ", "/tmp/test_pod.yaml", "file " + cfgPath,
		"nodeName", "master", "flag --hostname-override",
		"runDir", "/tmp/run", "flag --run-dir",
		"/var/lib/staticpodd",
		"warning: config " + cfgPath + ": clusterDomain is set but staticpodd ignores it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !hasRow(out, "failSwapOn", "false", "file", cfgPath) {
		t.Errorf("failSwapOn is not shown false from the file:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "staticPodPath" && (f[1] != "/tmp/test_pod.yaml" || f[2] != "file") {
			t.Errorf("staticPodPath line = %q", line)
		}
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "rootDir" && f[2] != "default" {
			t.Errorf("rootDir line = %q", line)
		}
	}

	out, err = execute(t, testRoot(newConfigCmd), "config", "--config", cfgPath, "--pod-manifest-path", "/srv/m", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Values   []struct{ Key, Value, Origin string }
		Warnings []string
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	found := false
	for _, v := range doc.Values {
		if v.Key == "staticPodPath" {
			found = v.Value == "/srv/m" && v.Origin == "flag --pod-manifest-path"
		}
	}
	if !found || len(doc.Warnings) != 1 {
		t.Errorf("json = %+v", doc)
	}
}

// With the read-only port on and no address, config shows why the read-only
// port listens on loopback while address (the node API's) is the kubelet's;
// the seed's own address stays as written.
func TestConfigCommandShowsLoopbackDefault(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare.yaml")
	seed := filepath.Join(dir, "seed.yaml")
	os.WriteFile(bare, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: 10255\n"), 0o644)
	os.WriteFile(seed, []byte(seedConfig+"readOnlyPort: 10255\n"), 0o644)
	for file, want := range map[string]string{
		bare: "address 0.0.0.0 default (the read-only port on loopback)",
		seed: "address 192.168.0.8 file " + seed,
	} {
		out, err := execute(t, testRoot(newConfigCmd), "config", "--config", file)
		if err != nil {
			t.Fatalf("config: %v\n%s", err, out)
		}
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "address ") {
				found = true
				if got := strings.Join(strings.Fields(line), " "); got != want {
					t.Errorf("address line %q, want %q", got, want)
				}
			}
		}
		if !found {
			t.Errorf("no address line:\n%s", out)
		}
	}
}

func TestConfigCommandRejectsUnknownField(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(seedConfig+"staticPodPth: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, testRoot(newConfigCmd), "config", "--config", cfgPath)
	if err == nil || !strings.Contains(err.Error(), `unknown field "staticPodPth"`) || !strings.Contains(err.Error(), cfgPath) {
		t.Errorf("err = %v", err)
	}
}
