package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// rejectArchives accepts pulls and refuses every import, OCI archive or
// docker-archive, whatever its path: the policy of a node that takes its
// images from a registry only.
const rejectArchives = `{"default":[{"type":"insecureAcceptAnything"}],"transports":{"oci-archive":{"":[{"type":"reject"}]},"docker-archive":{"":[{"type":"reject"}]}}}`

// acceptAll is the policy of a node without one.
const acceptAll = `{"default":[{"type":"insecureAcceptAnything"}]}`

// writePolicy replaces the policy file at path with body, atomically.
func writePolicy(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// storeState is what an import may change in the store: its index and the
// layers it has.
func storeState(t *testing.T, d *daemon) string {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(d.RootDir, "images", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(d.RootDir, "images", "layers"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(idx)
	for _, e := range ents {
		b.WriteString("\n" + e.Name())
	}
	return b.String()
}

// A policy file that does not load fails the daemon's start, naming the
// value, the file, the field of it and why, before any pod starts; and
// validate says the same.
func TestImagePolicyBadFileFailsStart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("a.yaml", sleeper("a", ""))
	bad := filepath.Join(d.Dir, "policy.json")
	writePolicy(t, bad, `{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker":{"quay.io":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k.gpg"}]}}}`)
	out, err := exec.Command(testdaemon.Bin, "run", "--config", d.Config, "--hostname-override", d.Name,
		"--root-dir", d.RootDir, "--run-dir", d.RunDir, "--image-policy", bad).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("run with a bad policy: %v\n%s", err, out)
	}
	want := "imagePolicyFile: " + bad + `: transports.docker."quay.io"[0].type: "signedBy"`
	if !strings.Contains(string(out), want) {
		t.Errorf("run output lacks %q:\n%s", want, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.RunDir, "containers")); len(ents) != 0 {
		t.Errorf("a container was made before the policy was read: %v", ents)
	}
	if out, err := d.CLIErr("validate", "--image-policy", bad); err == nil || !strings.Contains(out, want) {
		t.Errorf("validate of the bad policy: %v\n%s", err, out)
	}
	if out, err := d.CLIErr("check", "--config", d.Config, "--image-policy", bad); err == nil || !strings.Contains(out, "check failed: "+want) {
		t.Errorf("check with the bad policy: %v\n%s", err, out)
	}
	good := filepath.Join(d.Dir, "good.json")
	writePolicy(t, good, rejectArchives)
	if out := d.CLI("validate", "--image-policy", good); !strings.Contains(out, good+": valid image policy") {
		t.Errorf("validate of a good policy: %s", out)
	}
}

// Under a policy that refuses imports, the image imported before it is
// refused at the container's start (SignatureValidationFailed, the
// kubelet's message and events; images ls says why), a CLI import without
// --image-policy meets the daemon's policy and leaves the store unchanged,
// from a file and from stdin; a reload with a policy that does not load
// keeps the running one and says so in STATUS= (and the CLI, which reads the
// file, imports nothing), and one that accepts the image lets the pod start.
func TestImagePolicyImportsAndReload(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	pol := filepath.Join(d.Dir, "policy.json")
	writePolicy(t, pol, rejectArchives)
	d.Args = append(d.Args, "--image-policy", pol)
	d.WriteManifest("a.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: a
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	d.Start()
	sock.next(t, "READY=1", 60*time.Second)

	// The image was imported before the policy: refused now, kept.
	const wantMsg = "image pull failed for busybox because the signature validation failed: "
	d.Eventually(30*time.Second, "pod a waits SignatureValidationFailed", func() error {
		w := statusOf(d.Pod("a")).State.Waiting
		if w == nil || w.Reason != "SignatureValidationFailed" || !strings.HasPrefix(w.Message, wantMsg) {
			return fmt.Errorf("waiting %+v", w)
		}
		return nil
	})
	if out := d.CLI("events"); !strings.Contains(out, wantMsg) || !strings.Contains(out, "Error: SignatureValidationFailed") {
		t.Errorf("events lack the refusal:\n%s", out)
	}
	if out := d.CLI("images", "ls"); !strings.Contains(out, "VERIFICATION") || !strings.Contains(out, "rejected by policy: ") {
		t.Errorf("images ls does not say the image is refused:\n%s", out)
	}
	// The daemon logs the image its policy refuses.
	d.WaitLine(10*time.Second, "image refused by the image policy; its containers will not start")

	// Imports by hand meet the daemon's policy: refused, store unchanged.
	other := filepath.Join(d.Dir, "other.tar")
	buildImage(t, other, "-ref", "example.com/other:1", "-format", "oci")
	before := storeState(t, d)
	out, err := d.CLIErr("images", "import", other)
	if err == nil || !strings.Contains(out, "SignatureValidationFailed") {
		t.Errorf("import of an OCI archive under a policy refusing it: %v\n%s", err, out)
	}
	cmd := exec.Command(testdaemon.Bin, "images", "import", "-", "--root-dir", d.RootDir, "--run-dir", d.RunDir)
	f, err := os.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin = f
	var stdinOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdinOut, &stdinOut
	if err := cmd.Run(); err == nil || !strings.Contains(stdinOut.String(), "SignatureValidationFailed") {
		t.Errorf("import from stdin under a policy refusing it: %v\n%s", err, stdinOut.String())
	}
	if after := storeState(t, d); after != before {
		t.Errorf("a refused import changed the store:\nbefore %s\nafter  %s", before, after)
	}

	// A policy that does not load: the running one stays, STATUS= says why.
	writePolicy(t, pol, `{"default":[]}`)
	d.Signal(syscall.SIGHUP)
	sock.next(t, "RELOADING=1", 10*time.Second)
	msg := sock.next(t, "READY=1", 30*time.Second)
	if !strings.Contains(msg, "image policy not reloaded: imagePolicyFile: "+pol) {
		t.Errorf("STATUS= after a bad policy %q does not say it was not reloaded, naming the file", msg)
	}
	// The CLI reads the daemon's policy file, which does not load: it
	// imports nothing rather than without a policy.
	if out, err := d.CLIErr("images", "import", other); err == nil || !strings.Contains(out, "imagePolicyFile: "+pol) {
		t.Errorf("import while the daemon's policy file does not load: %v\n%s", err, out)
	}
	if after := storeState(t, d); after != before {
		t.Errorf("an import under a policy that does not load changed the store")
	}

	// A policy that accepts the image: the pod starts.
	writePolicy(t, pol, acceptAll)
	d.Signal(syscall.SIGHUP)
	sock.next(t, "RELOADING=1", 10*time.Second)
	if msg := sock.next(t, "READY=1", 30*time.Second); strings.Contains(msg, "not reloaded") {
		t.Errorf("STATUS= after a good policy %q still says it was not reloaded", msg)
	}
	d.WaitRunning("a", 90*time.Second)
	if out := d.CLI("images", "ls"); strings.Contains(out, "rejected by policy") || !strings.Contains(out, "accepted") {
		t.Errorf("images ls after the accepting policy:\n%s", out)
	}
	if out := d.CLI("images", "import", other); !strings.Contains(out, "example.com/other:1") {
		t.Errorf("import under the accepting policy: %s", out)
	}
}

// A PullImage through the CRI socket that the policy refuses fails as
// CRI-O's and containerd's do: status Unknown, its message (what the
// kubelet's CRI client keeps of an Unknown status) starting with
// SignatureValidationFailed, and the store has no new image.
func TestImagePolicyCRIPullRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	pol := filepath.Join(d.Dir, "policy.json")
	writePolicy(t, pol, `{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker":{"docker.io/library/busybox":[{"type":"reject"}]}}}`)
	d.Args = append(d.Args, "--image-policy", pol)
	d.Start()
	before := storeState(t, d)
	criClient(t, d) // waits for the socket
	conn, err := grpc.NewClient("unix://"+filepath.Join(d.RunDir, "cri.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:latest"}})
	st, _ := status.FromError(err)
	if st.Code() != codes.Unknown || !strings.HasPrefix(st.Message(), "SignatureValidationFailed: ") {
		t.Fatalf("PullImage under a policy refusing it: %v; want Unknown, SignatureValidationFailed: …", err)
	}
	if after := storeState(t, d); after != before {
		t.Errorf("a refused pull changed the store:\nbefore %s\nafter  %s", before, after)
	}
}
