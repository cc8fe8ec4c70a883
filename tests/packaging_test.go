package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/config"
)

// unitFile reads a systemd unit or drop-in: section -> key -> values in
// order (a key may repeat), comments and blank lines left out.
func unitFile(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: %q", path, line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// staticpodd-kubeadm's kubelet.service runs the same daemon on the same state
// as staticpodd.service: its [Service] is that unit's but for how it starts,
// and starting it stops staticpodd.service.
func TestKubeletUnitIsStaticpoddsService(t *testing.T) {
	kubelet := unitFile(t, "../packaging/kubeadm/kubelet.service")
	staticpodd := unitFile(t, "../packaging/staticpodd.service")
	differ := map[string]string{
		"ExecStart":       "/usr/bin/kubelet",
		"EnvironmentFile": "",   // the drop-in reads kubeadm's files
		"RestartSec":      "10", // the kubelet's unit's, while kubeadm has not configured the node
	}
	for k, vs := range staticpodd["Service"] {
		want, ok := differ[k]
		switch {
		case !ok && !slices.Equal(kubelet["Service"][k], vs):
			t.Errorf("kubelet.service %s=%q, staticpodd.service's is %q", k, kubelet["Service"][k], vs)
		case ok && want != "" && !slices.Equal(kubelet["Service"][k], []string{want}):
			t.Errorf("kubelet.service %s=%q, want %q", k, kubelet["Service"][k], want)
		case ok && want == "" && kubelet["Service"][k] != nil:
			t.Errorf("kubelet.service has %s=%q", k, kubelet["Service"][k])
		}
	}
	for k := range kubelet["Service"] {
		if _, ok := staticpodd["Service"][k]; !ok {
			t.Errorf("kubelet.service has %s, which staticpodd.service has not", k)
		}
	}
	if c := kubelet["Unit"]["Conflicts"]; !slices.Equal(c, []string{"staticpodd.service"}) {
		t.Errorf("kubelet.service Conflicts=%q, want staticpodd.service: one daemon per run dir", c)
	}
	if !slices.Equal(kubelet["Install"]["WantedBy"], staticpodd["Install"]["WantedBy"]) {
		t.Errorf("kubelet.service WantedBy=%q, staticpodd.service's %q", kubelet["Install"]["WantedBy"], staticpodd["Install"]["WantedBy"])
	}
}

// The drop-in is kubeadm's 10-kubeadm.conf: the variables kubeadm's docs
// and users rely on, from the files kubeadm writes, on the same command line.
func TestKubeadmDropInIsKubeadms(t *testing.T) {
	d := unitFile(t, "../packaging/kubeadm/10-kubeadm.conf")["Service"]
	want := map[string][]string{
		"Environment": {
			`"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"`,
			`"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"`,
		},
		"EnvironmentFile": {"-/var/lib/kubelet/kubeadm-flags.env", "-/etc/default/kubelet", "-/etc/sysconfig/kubelet"},
		"ExecStart":       {"", "/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"},
	}
	for k, w := range want {
		if !slices.Equal(d[k], w) {
			t.Errorf("10-kubeadm.conf %s=%q, want %q", k, d[k], w)
		}
	}
	if len(d) != len(want) {
		t.Errorf("10-kubeadm.conf sets %d keys, want %d: %v", len(d), len(want), d)
	}
}

// staticpodd-cri.socket holds the CRI socket the daemon serves and crictl.yaml
// names, for kubelet.service under the name the daemon takes it by, and
// outlives the service: kubeadm reset calls the CRI after it has stopped the
// kubelet.
func TestCRISocketUnit(t *testing.T) {
	u := unitFile(t, "../packaging/kubeadm/staticpodd-cri.socket")
	path := filepath.Join(config.DefaultRunDir, config.CRISocketName)
	want := map[string][]string{
		"ListenStream":       {path},
		"FileDescriptorName": {"cri"},
		"SocketMode":         {"0600"},
		"Service":            {"kubelet.service"},
	}
	for k, w := range want {
		if !slices.Equal(u["Socket"][k], w) {
			t.Errorf("staticpodd-cri.socket %s=%q, want %q", k, u["Socket"][k], w)
		}
	}
	if p, ok := u["Unit"]["PartOf"]; ok {
		t.Errorf("staticpodd-cri.socket PartOf=%q: stopping kubelet.service would close the CRI kubeadm reset calls next", p)
	}
	if c := u["Unit"]["Conflicts"]; !slices.Equal(c, []string{"staticpodd.service"}) {
		t.Errorf("staticpodd-cri.socket Conflicts=%q, want staticpodd.service, which binds the path itself", c)
	}
	crictl, err := os.ReadFile("../packaging/kubeadm/crictl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"runtime-endpoint", "image-endpoint"} {
		if !strings.Contains(string(crictl), "\n"+k+": unix://"+path+"\n") {
			t.Errorf("crictl.yaml's %s is not unix://%s", k, path)
		}
	}
}

// What make deb rpm built (STATICPODD_PKG_DIR, set by make test-packages):
// both packages, staticpodd-kubeadm with what makes kubeadm drive staticpodd,
// and no lintian error but those the project accepts.
func TestPackagesBuilt(t *testing.T) {
	dir := os.Getenv("STATICPODD_PKG_DIR")
	if dir == "" {
		t.Skip("STATICPODD_PKG_DIR is not set: make test-packages builds the packages and sets it")
	}
	one := func(pattern string) string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) != 1 {
			t.Fatalf("%s in %s: %q, want one", pattern, dir, m)
		}
		return m[0]
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	deb, kdeb := one("staticpodd_*.deb"), one("staticpodd-kubeadm_*.deb")
	version := strings.TrimSpace(run("dpkg-deb", "-f", deb, "Version"))
	fields := run("dpkg-deb", "-f", kdeb, "Depends", "Provides", "Conflicts", "Replaces")
	for _, w := range []string{
		"Depends: staticpodd (= " + version + ")", "Provides: kubelet (= 1.37.2)", "Conflicts: kubelet", "Replaces: kubelet",
	} {
		if !strings.Contains(fields, w) {
			t.Errorf("staticpodd-kubeadm.deb: no %q in\n%s", w, fields)
		}
	}
	files := run("dpkg-deb", "-c", kdeb)
	for _, w := range []string{
		"./usr/bin/kubelet -> staticpodd", "./lib/systemd/system/kubelet.service\n",
		"./lib/systemd/system/kubelet.service.d/10-kubeadm.conf\n", "./etc/default/kubelet\n", "./etc/crictl.yaml\n",
		"./usr/share/doc/staticpodd-kubeadm/copyright\n", "./usr/share/man/man8/kubelet.8.gz -> staticpodd.8.gz",
	} {
		if !strings.Contains(files, w) {
			t.Errorf("staticpodd-kubeadm.deb lacks %q:\n%s", strings.TrimSpace(w), files)
		}
	}
	conffiles := run("sh", "-c", "dpkg-deb --ctrl-tarfile "+kdeb+" | tar -xO ./conffiles")
	if want := "/etc/crictl.yaml\n/etc/default/kubelet\n"; conffiles != want {
		t.Errorf("conffiles %q, want %q", conffiles, want)
	}
	// The packaged CRI socket is the default run dir's.
	crictl := run("sh", "-c", "dpkg-deb --fsys-tarfile "+kdeb+" | tar -xO ./etc/crictl.yaml")
	if !strings.Contains(crictl, "runtime-endpoint: unix:///run/staticpodd/cri.sock\n") {
		t.Errorf("crictl.yaml:\n%s", crictl)
	}

	// Shell completion, where each shell looks for a package's.
	files = run("dpkg-deb", "-c", deb)
	for _, w := range []string{"./usr/share/bash-completion/completions/staticpodd\n",
		"./usr/share/zsh/vendor-completions/_staticpodd\n", "./usr/share/fish/vendor_completions.d/staticpodd.fish\n"} {
		if !strings.Contains(files, w) {
			t.Errorf("staticpodd.deb lacks %q", strings.TrimSpace(w))
		}
	}
	bash := run("sh", "-c", "dpkg-deb --fsys-tarfile "+deb+" | tar -xO ./usr/share/bash-completion/completions/staticpodd")
	if !strings.Contains(bash, "complete -o default -F __start_staticpodd staticpodd") {
		t.Errorf("the bash completion is not cobra's for staticpodd:\n%.300s", bash)
	}

	krpm := one("staticpodd-kubeadm-*.rpm")
	for query, want := range map[string][]string{
		"--requires":  {"staticpodd = " + version},
		"--provides":  {"kubelet = 1.37.2"},
		"--conflicts": {"kubelet"},
		"--list":      {"/usr/bin/kubelet", "/lib/systemd/system/kubelet.service", "/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", "/etc/sysconfig/kubelet", "/etc/crictl.yaml"},
	} {
		got := strings.Split(run("rpm", "-qp", query, krpm), "\n")
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("staticpodd-kubeadm.rpm %s: no %q in %q", query, w, got)
			}
		}
	}

	if _, err := exec.LookPath("lintian"); err != nil {
		t.Skip("no lintian")
	}
	// Accepted: a native package without a changelog; a static binary (the
	// point of staticpodd); maintainer scripts that call systemctl (they
	// must, as the unit is enabled, started and restarted by them).
	out, err := exec.Command("lintian", "--fail-on", "error,warning", "--suppress-tags",
		"no-changelog,statically-linked-binary,maintainer-script-calls-systemctl,non-standard-dir-perm", deb, kdeb).CombinedOutput()
	if err != nil {
		t.Errorf("lintian: %v\n%s", err, out)
	}
	t.Logf("lintian:\n%s", out)
}
