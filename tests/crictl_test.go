package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// crictlBin is $CRICTL, which make test-cri sets to the crictl
// tests/crictl/build.sh builds once into its cache; without it the test is
// skipped, so that make test never waits for that build.
func crictlBin(t *testing.T) string {
	t.Helper()
	b := os.Getenv("CRICTL")
	if b == "" {
		t.Skip("CRICTL is not set: make test-cri builds crictl (tests/crictl/build.sh) and runs this test")
	}
	return b
}

// crictl runs crictl against one daemon's CRI socket, configured as
// docs/configuration.md tells an operator to: a crictl.yaml naming the
// runtime endpoint alone (the image endpoint defaults to it).
type crictl struct {
	bin    string
	config string
}

func newCrictl(t *testing.T, d *daemon, bin string) *crictl {
	t.Helper()
	config := filepath.Join(d.Dir, "crictl.yaml")
	body := fmt.Sprintf("runtime-endpoint: unix://%s\ntimeout: 10\n", filepath.Join(d.RunDir, "cri.sock"))
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return &crictl{bin: bin, config: config}
}

func (c *crictl) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--config", c.config}, args...)...)
	// Nothing of the host's own crictl configuration.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CONTAINER_RUNTIME_ENDPOINT=") && !strings.HasPrefix(e, "IMAGE_SERVICE_ENDPOINT=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	return cmd
}

// run runs crictl and returns its stdout; a failure fails the test.
func (c *crictl) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.runErr(args...)
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *crictl) runErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.cmd(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// table is crictl's table output: the header's column names, and each row
// split where the header's columns begin.
type table struct {
	header []string
	rows   []map[string]string
}

var columnStart = regexp.MustCompile(`\S+( \S+)*`)

func parseTable(t *testing.T, out string) table {
	t.Helper()
	// stats clears the screen first, as for --watch.
	out = strings.TrimPrefix(out, "\033[2J\033[H")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table in %q", out)
	}
	var tb table
	cols := columnStart.FindAllStringIndex(lines[0], -1)
	for _, c := range cols {
		tb.header = append(tb.header, lines[0][c[0]:c[1]])
	}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, c := range cols {
			end := len(line)
			if i+1 < len(cols) {
				end = min(cols[i+1][0], len(line))
			}
			if c[0] < len(line) {
				row[tb.header[i]] = strings.TrimSpace(line[c[0]:end])
			}
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

// crictl, the tool every kubeadm troubleshooting page reaches for, against
// staticpodd's CRI socket: what a user sees of a static pod through info,
// version, pods, ps, inspect, inspectp, logs -f, exec (with and without a
// tty), stats, images, imagefsinfo, pull, inspecti, rmi, stopp and rmp.
func TestCrictl(t *testing.T) {
	t.Parallel()
	bin := crictlBin(t)
	d := newDaemon(t)
	c := newCrictl(t, d, bin)
	// No mirror (the tests' _default hosts.toml sends every pull to their
	// own registry): crictl pull reaches the registry it names.
	noMirrors := filepath.Join(d.Dir, "certs.d")
	if err := os.MkdirAll(noMirrors, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--registry-config-dir", noMirrors)
	d.Start()
	d.WriteManifest("web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kube-system}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "echo started; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	d.WaitRunning("web", 60*time.Second)
	podName := "web-" + d.Name

	t.Run("info", func(t *testing.T) {
		var info struct {
			Status struct {
				Conditions []struct {
					Type   string `json:"type"`
					Status bool   `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		}
		out := c.run(t, "info")
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("crictl info: %v\n%s", err, out)
		}
		ready := map[string]bool{}
		for _, cond := range info.Status.Conditions {
			ready[cond.Type] = cond.Status
		}
		if !ready["RuntimeReady"] || !ready["NetworkReady"] {
			t.Errorf("crictl info conditions %v, want RuntimeReady and NetworkReady true\n%s", ready, out)
		}
	})
	t.Run("version", func(t *testing.T) {
		out := c.run(t, "version")
		for _, want := range []string{"RuntimeName:", "staticpodd", "RuntimeApiVersion:", "v1"} {
			if !strings.Contains(out, want) {
				t.Errorf("crictl version says no %q:\n%s", want, out)
			}
		}
	})

	// pods and ps: the static pod by its name on the node, and its
	// container, as the kubelet's runtime shows them.
	pods := parseTable(t, c.run(t, "pods"))
	if len(pods.rows) != 1 || pods.rows[0]["NAME"] != podName || pods.rows[0]["STATE"] != "Ready" || pods.rows[0]["NAMESPACE"] != "kube-system" {
		t.Fatalf("crictl pods: %+v, want %s Ready in kube-system", pods.rows, podName)
	}
	podID := pods.rows[0]["POD ID"]
	ps := parseTable(t, c.run(t, "ps", "-a"))
	if len(ps.rows) != 1 || ps.rows[0]["NAME"] != "main" || ps.rows[0]["STATE"] != "Running" || ps.rows[0]["POD"] != podName ||
		!strings.HasPrefix(podID, ps.rows[0]["POD ID"]) {
		t.Fatalf("crictl ps -a: %+v, want main Running in %s (%s)", ps.rows, podName, podID)
	}
	ctrID := ps.rows[0]["CONTAINER"]

	t.Run("inspect", func(t *testing.T) {
		var ctr struct {
			Status struct {
				ID       string `json:"id"`
				State    string `json:"state"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Labels map[string]string `json:"labels"`
			} `json:"status"`
		}
		out := c.run(t, "inspect", ctrID)
		if err := json.Unmarshal([]byte(out), &ctr); err != nil {
			t.Fatalf("crictl inspect: %v\n%s", err, out)
		}
		if !strings.HasPrefix(ctr.Status.ID, ctrID) || ctr.Status.State != "CONTAINER_RUNNING" || ctr.Status.Metadata.Name != "main" ||
			ctr.Status.Labels["io.kubernetes.pod.name"] != podName {
			t.Errorf("crictl inspect: %+v\n%s", ctr.Status, out)
		}
		var pod struct {
			Status struct {
				State    string `json:"state"`
				Metadata struct {
					Name, Namespace string
				} `json:"metadata"`
			} `json:"status"`
		}
		out = c.run(t, "inspectp", podID)
		if err := json.Unmarshal([]byte(out), &pod); err != nil {
			t.Fatalf("crictl inspectp: %v\n%s", err, out)
		}
		if pod.Status.State != "SANDBOX_READY" || pod.Status.Metadata.Name != podName || pod.Status.Metadata.Namespace != "kube-system" {
			t.Errorf("crictl inspectp: %+v\n%s", pod.Status, out)
		}
	})

	t.Run("logs -f", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := c.cmd(ctx, "logs", "-f", ctrID)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); cmd.Wait() }()
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		want := "started"
		for line := range lines {
			if line == want {
				if want == "started" {
					// The container writes a new line now: follow must see it.
					want = "followed-" + testdaemon.RandHex(4)
					c.run(t, "exec", ctrID, "sh", "-c", "echo "+want+" > /proc/1/fd/1")
					continue
				}
				return
			}
		}
		t.Fatalf("crictl logs -f ended before showing %q (context: %v)", want, ctx.Err())
	})

	t.Run("exec", func(t *testing.T) {
		// Not a tty, streamed: stdout, and the command's exit status in
		// crictl's error.
		out, err := c.runErr("exec", ctrID, "sh", "-c", "echo $((6*7)); exit 3")
		if !strings.Contains(out, "42") || err == nil || !strings.Contains(out, "exit code 3") {
			t.Errorf("crictl exec of echo 42; exit 3: %v, want 42 and exit code 3 said:\n%s", err, out)
		}
		// Synchronous (ExecSync): the output, and a failure said.
		if out := c.run(t, "exec", "-s", ctrID, "cat", "/proc/1/comm"); strings.TrimSpace(out) != "sh" {
			t.Errorf("crictl exec -s: %q, want sh", out)
		}
		out, err = c.runErr("exec", "-s", ctrID, "sh", "-c", "exit 3")
		if err == nil || !strings.Contains(out, "exited with 3") {
			t.Errorf("crictl exec -s of exit 3: %v, want exited with 3 said:\n%s", err, out)
		}
		// -it through a pty, as a user at a terminal: script(1) gives
		// crictl one, and types into it.
		if _, err := exec.LookPath("script"); err != nil {
			t.Fatalf("script(1) (util-linux) is needed for exec -it: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		line := strings.Join([]string{c.bin, "--config", c.config, "exec", "-it", ctrID, "sh"}, " ")
		cmd := exec.CommandContext(ctx, "script", "-qefc", line, "/dev/null")
		cmd.Env = append(os.Environ(), "TERM=xterm")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var tty strings.Builder
		var mu sync.Mutex
		cmd.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return tty.Write(p) })
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(stdin, "tty; echo sum=$((40+2)); exit\n")
		err = cmd.Wait()
		mu.Lock()
		out = tty.String()
		mu.Unlock()
		if err != nil || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "sum=42") {
			t.Errorf("crictl exec -it: %v, want a pts and sum=42:\n%q", err, out)
		}
	})

	t.Run("stats", func(t *testing.T) {
		st := parseTable(t, c.run(t, "stats"))
		if len(st.rows) != 1 || st.rows[0]["NAME"] != "main" || !strings.HasPrefix(ctrID, st.rows[0]["CONTAINER"]) ||
			st.rows[0]["MEM"] == "" || st.rows[0]["MEM"] == "0B" {
			t.Errorf("crictl stats: %+v, want main's memory", st.rows)
		}
	})

	t.Run("images pull rmi", func(t *testing.T) {
		imgs := parseTable(t, c.run(t, "images"))
		found := false
		for _, r := range imgs.rows {
			found = found || (r["IMAGE"] == "docker.io/library/busybox" && r["TAG"] == "latest" && r["IMAGE ID"] != "" && r["SIZE"] != "")
		}
		if !found {
			t.Fatalf("crictl images: %+v, want docker.io/library/busybox latest", imgs.rows)
		}
		// A filter, as a user types it: the short name.
		if rows := parseTable(t, c.run(t, "images", "busybox")).rows; len(rows) != 1 || rows[0]["IMAGE"] != "docker.io/library/busybox" {
			t.Errorf("crictl images busybox: %+v, want busybox alone", rows)
		}
		if rows := parseTable(t, c.run(t, "images", "nginx")).rows; len(rows) != 0 {
			t.Errorf("crictl images nginx: %+v, want none", rows)
		}
		var fs struct {
			Status struct {
				ImageFilesystems []struct {
					FsID struct {
						Mountpoint string `json:"mountpoint"`
					} `json:"fsId"`
					UsedBytes struct {
						Value string `json:"value"`
					} `json:"usedBytes"`
					InodesUsed struct {
						Value string `json:"value"`
					} `json:"inodesUsed"`
				} `json:"imageFilesystems"`
			} `json:"status"`
		}
		out := c.run(t, "imagefsinfo")
		if err := json.Unmarshal([]byte(out), &fs); err != nil || len(fs.Status.ImageFilesystems) != 1 {
			t.Fatalf("crictl imagefsinfo: %v\n%s", err, out)
		}
		// busybox alone is about a megabyte and a few hundred inodes.
		f := fs.Status.ImageFilesystems[0]
		used, _ := strconv.ParseUint(f.UsedBytes.Value, 10, 64)
		inodes, _ := strconv.ParseUint(f.InodesUsed.Value, 10, 64)
		if f.FsID.Mountpoint != filepath.Join(d.RootDir, "images") || used < 512<<10 || used > 64<<20 || inodes < 10 || inodes > 100000 {
			t.Errorf("crictl imagefsinfo: %s, %d bytes, %d inodes; want the store's directory and busybox's size\n%s", f.FsID.Mountpoint, used, inodes, out)
		}

		// A plain-HTTP registry on the loopback, which needs no hosts.toml.
		r := startDistRegistryWith(t, registryBin(t), false)
		base, err := tarball.ImageFromPath(testdaemon.Image, nil)
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(base, fileLayer(t, map[string][]byte{"version": []byte("crictl")}))
		if err != nil {
			t.Fatal(err)
		}
		r.push(img, "tools/busybox:crictl")
		ref := r.addr + "/tools/busybox:crictl"
		want, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		// A pod that may not pull waits for the image; crictl pull brings it.
		d.WriteManifest("never.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: never}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`, ref))
		d.Eventually(30*time.Second, "the pod waits ErrImageNeverPull", func() error {
			if w := statusOf(d.Pod("never")).State.Waiting; w == nil || w.Reason != "ErrImageNeverPull" {
				return fmt.Errorf("state %+v", statusOf(d.Pod("never")).State)
			}
			return nil
		})
		if out := c.run(t, "pull", ref); !strings.Contains(out, "Image is up to date for "+want.String()) {
			t.Fatalf("crictl pull %s: %q, want its ID %s", ref, out, want)
		}
		if r.requests(`tools/busybox/manifests/crictl`) == 0 {
			t.Fatalf("crictl pull did not reach the registry:\n%s", r.Stderr())
		}
		row := imageRow(t, c, r.addr+"/tools/busybox")
		if row == nil || row["TAG"] != "crictl" || !strings.HasPrefix(want.Hex, row["IMAGE ID"]) {
			t.Fatalf("crictl images after the pull: %v, want %s", row, ref)
		}
		if out := c.run(t, "inspecti", ref); !strings.Contains(out, want.String()) || !strings.Contains(out, `"chainID"`) {
			t.Errorf("crictl inspecti %s:\n%s", ref, out)
		}
		// By the repository digest it was pulled by, as crictl images --digests shows it.
		md, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		byDigest := r.addr + "/tools/busybox@" + md.String()
		if out := c.run(t, "images", "--digests"); !strings.Contains(out, md.Hex[:13]) {
			t.Errorf("crictl images --digests shows no %s:\n%s", md, out)
		}
		if out := c.run(t, "inspecti", byDigest); !strings.Contains(out, want.String()) {
			t.Errorf("crictl inspecti %s:\n%s", byDigest, out)
		}
		d.WaitRunning("never", 30*time.Second)
		// rmi removes an image a running container uses, as containerd's;
		// the container runs on.
		if out := c.run(t, "rmi", ref); !strings.Contains(out, "Deleted: "+ref) {
			t.Errorf("crictl rmi %s: %q", ref, out)
		}
		if row := imageRow(t, c, r.addr+"/tools/busybox"); row != nil {
			t.Errorf("crictl images after rmi: %v", row)
		}
		if _, err := c.runErr("inspecti", ref); err == nil {
			t.Errorf("crictl inspecti of the removed image succeeded")
		}
		if cs := statusOf(d.Pod("never")); cs.State.Running == nil || cs.RestartCount != 0 {
			t.Errorf("the container of the removed image: %+v, want it running on", cs)
		}
		d.RemoveManifest("never.yaml")
		d.Eventually(30*time.Second, "the never pod is gone", func() error {
			if d.Pod("never") != nil {
				return errStill
			}
			return nil
		})

		// A registry behind basic auth (over TLS, which on the loopback
		// needs no CA), and no Docker config: --creds opens it.
		priv := startDistRegistryWith(t, registryBin(t), true)
		priv.push(img, "private/busybox:crictl")
		pref := priv.addr + "/private/busybox:crictl"
		if out, err := c.runErr("pull", pref); err == nil || !strings.Contains(out, "UNAUTHORIZED") {
			t.Errorf("crictl pull %s without credentials: %v, want UNAUTHORIZED\n%s", pref, err, out)
		}
		if out := c.run(t, "pull", "--creds", priv.user+":"+priv.pass, pref); !strings.Contains(out, "Image is up to date for "+want.String()) {
			t.Errorf("crictl pull --creds %s: %q, want its ID %s", pref, out, want)
		}
		if row := imageRow(t, c, priv.addr+"/private/busybox"); row == nil || row["TAG"] != "crictl" {
			t.Errorf("crictl images after pull --creds: %v", row)
		}
	})

	// stopp and rmp, as kubeadm reset does: the pod stops, then goes.
	if out, err := c.runErr("stopp", podID); err != nil || !strings.Contains(out, "Stopped sandbox "+podID) {
		t.Errorf("crictl stopp: %v\n%s", err, out)
	}
	if pods := parseTable(t, c.run(t, "pods")); len(pods.rows) != 1 || pods.rows[0]["STATE"] != "NotReady" {
		t.Errorf("crictl pods after stopp: %+v, want %s NotReady", pods.rows, podName)
	}
	if out, err := c.runErr("rmp", podID); err != nil || !strings.Contains(out, "Removed sandbox "+podID) {
		t.Errorf("crictl rmp: %v\n%s", err, out)
	}
	if pods := parseTable(t, c.run(t, "pods")); len(pods.rows) != 0 {
		t.Errorf("crictl pods after rmp: %+v, want none", pods.rows)
	}
	if ps := parseTable(t, c.run(t, "ps", "-a")); len(ps.rows) != 0 {
		t.Errorf("crictl ps -a after rmp: %+v, want none", ps.rows)
	}
	d.RemoveManifest("web.yaml")
	d.Eventually(30*time.Second, "the pod is gone", func() error {
		if n := len(d.Pods()); n != 0 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	d.AssertNoLeaks()
}

// imageRow is crictl images' row of repository repo, nil if none.
func imageRow(t *testing.T, c *crictl, repo string) map[string]string {
	t.Helper()
	for _, r := range parseTable(t, c.run(t, "images")).rows {
		if r["IMAGE"] == repo {
			return r
		}
	}
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
