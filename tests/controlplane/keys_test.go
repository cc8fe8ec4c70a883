//go:build controlplane

package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
)

// keysDir is where a component rewritten by keysFromCredentials reads its
// private keys: the mount of a secret volume, as in tests/systemd's proof.
const keysDir = "/etc/kubernetes/keys"

// keyFlags are, for each component that reads private keys of kubeadm's,
// the flags naming the keys that it reads from a Secret instead: the API
// server's serving key and service-account signing key (and
// --service-account-key-file, were it the private key: kubeadm gives it
// sa.pub), and the controller manager's copy of the signing key, which it
// needs to start at all (its tokens controller fails without it).
var keyFlags = map[string][]string{
	"kube-apiserver":          {"--tls-private-key-file", "--service-account-signing-key-file", "--service-account-key-file"},
	"kube-controller-manager": {"--service-account-private-key-file"},
}

// credentialKeys is what keysFromCredentials did to the cluster.
type credentialKeys struct {
	// Dir is the credentials directory given to staticpodd, with each key
	// under its file name in kubeadm's pki.
	Dir string
	// Secrets are the manifests of the Secrets, by file name.
	Secrets map[string]string
	// Moved are the keys taken out of the cluster's pki, by credential name
	// (their content).
	Moved map[string][]byte
	// AuditLog is where the API server logs the writes to kube-system's pods.
	AuditLog string
}

// secretName is the Secret of a component's keys.
func secretName(component string) string { return component + "-keys" }

// keysFromCredentials makes kubeadm's control plane read its private keys
// from Secrets whose values are credentials, as tests/systemd's proof does
// with LoadCredentialEncrypted=: the manifests of the components of
// keyFlags are rewritten in place (each flag of keyFlags that names a key
// of the pki names the same key in a secret volume at keysDir), a Secret a
// component in kube-system lists its keys (staticpodd.io/credentials:
// key=credential, the credential named as the file), the keys are copied
// into a credentials directory and removed from the pki, so that the
// processes can have them from nowhere else. The API server's manifest also
// gets an audit log of kube-system's pod writes, which is how the test
// counts the mirror pods' creates and deletes.
func keysFromCredentials(t *testing.T, cl *cluster.Cluster) *credentialKeys {
	t.Helper()
	k := &credentialKeys{
		Dir:      filepath.Join(t.TempDir(), "credentials"),
		Secrets:  map[string]string{},
		Moved:    map[string][]byte{},
		AuditLog: filepath.Join(cl.Dir, "audit", "audit.log"),
	}
	if err := os.Mkdir(k.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for component, flags := range keyFlags {
		b, err := os.ReadFile(cl.Manifest(component))
		if err != nil {
			t.Fatal(err)
		}
		var pod v1.Pod
		if err := yaml.UnmarshalStrict(b, &pod); err != nil {
			t.Fatalf("%s: %v", cl.Manifest(component), err)
		}
		c := &pod.Spec.Containers[0]
		var pairs []string
		for i, arg := range c.Command {
			flag, file, ok := strings.Cut(arg, "=")
			if !ok || !slices.Contains(flags, flag) || filepath.Dir(file) != cl.PKI || filepath.Ext(file) != ".key" {
				continue
			}
			key := filepath.Base(file)
			c.Command[i] = flag + "=" + filepath.Join(keysDir, key)
			if _, ok := k.Moved[key]; !ok {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(k.Dir, key), data, 0o400); err != nil {
					t.Fatal(err)
				}
				k.Moved[key] = data
			}
			if pair := key + "=" + key; !slices.Contains(pairs, pair) {
				pairs = append(pairs, pair)
			}
		}
		if len(pairs) == 0 {
			t.Fatalf("kubeadm's %s manifest names none of the keys of %v in %s:\n%s", component, flags, cl.PKI, b)
		}
		mode := int32(0o400)
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "keys",
			VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secretName(component), DefaultMode: &mode}}})
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "keys", MountPath: keysDir, ReadOnly: true})
		if component == "kube-apiserver" {
			auditPodWrites(t, &pod, filepath.Dir(k.AuditLog))
		}
		out, err := yaml.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cl.Manifest(component), out, 0o644); err != nil {
			t.Fatal(err)
		}
		k.Secrets[secretName(component)+".yaml"] = fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: kube-system
  annotations:
    staticpodd.io/credentials: %s
type: Opaque
`, secretName(component), strings.Join(pairs, ","))
	}
	// Removed once every manifest that names a key has been rewritten:
	// sa.key serves two.
	for key := range k.Moved {
		if err := os.Remove(filepath.Join(cl.PKI, key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"apiserver.key", "sa.key"} {
		if _, ok := k.Moved[key]; !ok {
			t.Fatalf("kubeadm's manifests do not name %s: %v moved", key, k.Moved)
		}
	}
	return k
}

// auditPodWrites makes the API server of pod log every create and delete of
// a pod of kube-system to dir/audit.log (blocking: written before the
// answer), with its policy in dir, a hostPath volume of the same path.
func auditPodWrites(t *testing.T, pod *v1.Pod, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [pods]}]
  namespaces: [kube-system]
  verbs: [create, delete]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &pod.Spec.Containers[0]
	c.Command = append(c.Command, "--audit-policy-file="+policy, "--audit-log-path="+filepath.Join(dir, "audit.log"), "--audit-log-mode=blocking")
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "audit",
		VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}})
	c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "audit", MountPath: dir})
}

// podWrites counts, in the audit log, the creates of the pod
// kube-system/name that made it, those refused, and its deletes. Two
// refusals are not counted: a conflict (a create of a pod that is there
// changes nothing), and those of the API server's first moments, before
// it has made the kube-system namespace (404, namespaces "kube-system" not
// found) or its system PriorityClasses, which kubeadm's pods name (the
// kubelet's first creates meet them too).
type podWrites struct {
	created, refused, deleted int
	log                       string // the entries, a line each
}

func (k *credentialKeys) writes(name string) (*podWrites, error) {
	b, err := os.ReadFile(k.AuditLog)
	if err != nil {
		return nil, err
	}
	w := &podWrites{}
	var lines strings.Builder
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var ev struct {
			StageTimestamp time.Time `json:"stageTimestamp"`
			Verb           string    `json:"verb"`
			User           struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"responseStatus"`
		}
		if err := dec.Decode(&ev); err != nil {
			break
		}
		if ev.ObjectRef.Namespace != "kube-system" || ev.ObjectRef.Name != name || ev.ObjectRef.Subresource != "" {
			continue
		}
		fmt.Fprintf(&lines, "  %s %s %s code=%d %s\n", ev.StageTimestamp.UTC().Format("15:04:05.000"), ev.Verb,
			ev.User.Username, ev.ResponseStatus.Code, ev.ResponseStatus.Message)
		switch {
		case ev.Verb == "create" && ev.ResponseStatus.Code == 201:
			w.created++
		case ev.Verb == "create" && ev.ResponseStatus.Code != 409 &&
			!strings.Contains(ev.ResponseStatus.Message, "no PriorityClass with name system-node-critical was found") &&
			!(ev.ResponseStatus.Code == 404 && ev.ResponseStatus.Message == `namespaces "kube-system" not found`):
			w.refused++
		case ev.Verb == "delete" && ev.ResponseStatus.Code == 200:
			w.deleted++
		}
	}
	w.log = lines.String()
	return w, nil
}

// checkKeysFromSecret checks that the component, whose pod is local, runs
// with the keys of its Secret and nothing else, and that its mirror pod is
// the API server's with the Secret volume left out as node-local.
func (cp *controlPlane) checkKeysFromSecret(component string, local, mirrorPod v1.Pod) {
	t := cp.t
	t.Helper()
	for key := range cp.keys.Moved {
		if _, err := os.Stat(filepath.Join(cp.cl.PKI, key)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is in the pki: %v", key, err)
		}
	}
	// staticpodd runs the pod with a secret volume...
	if v := volume(&local, "keys"); v == nil || v.Secret == nil || v.Secret.SecretName != secretName(component) {
		t.Errorf("%s's static pod: volume keys %+v, want the secret %s", component, v, secretName(component))
	}
	proc, ok := cp.pids()[component]
	if !ok {
		t.Fatalf("no %s process", component)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", proc.PID))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(cmdline), "\x00")
	for _, flag := range keyFlags[component] {
		for _, a := range args {
			if f, file, _ := strings.Cut(a, "="); f == flag && strings.HasSuffix(file, ".key") && filepath.Dir(file) != keysDir {
				t.Errorf("%s reads a private key outside the secret volume: %s", component, a)
			}
		}
	}
	// ...a tmpfs, with the credentials' content, 0400.
	root := fmt.Sprintf("/proc/%d/root%s", proc.PID, keysDir)
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Errorf("%s's %s: filesystem type %#x, want tmpfs: %v", component, keysDir, st.Type, err)
	}
	for _, a := range args {
		flag, file, _ := strings.Cut(a, "=")
		if !slices.Contains(keyFlags[component], flag) || filepath.Dir(file) != keysDir {
			continue
		}
		key := filepath.Base(file)
		got, err := os.ReadFile(filepath.Join(root, key))
		if err != nil || !bytes.Equal(got, cp.keys.Moved[key]) {
			t.Errorf("%s's %s is not the credential %s: %v", component, file, key, err)
		}
		if fi, err := os.Stat(filepath.Join(root, key)); err != nil || fi.Mode().Perm() != 0o400 {
			t.Errorf("%s's %s: %v %v, want mode 0400", component, file, fi.Mode(), err)
		}
	}
	// The API server took the mirror pod: the secret volume is an emptyDir
	// in memory there, and the annotation says what it was.
	if want := "volume keys: secret " + secretName(component); mirrorPod.Annotations[mirror.AnnotationNodeLocalObjects] != want {
		t.Errorf("%s's mirror pod: %s %q, want %q", component, mirror.AnnotationNodeLocalObjects, mirrorPod.Annotations[mirror.AnnotationNodeLocalObjects], want)
	}
	if v := volume(&mirrorPod, "keys"); v == nil || v.Secret != nil || v.EmptyDir == nil || v.EmptyDir.Medium != v1.StorageMediumMemory {
		t.Errorf("%s's mirror pod: volume keys %+v, want an emptyDir in memory", component, v)
	}
}

// checkServiceAccountToken checks that a token the API server signs (with
// the key of its Secret) authenticates: the API server verifies it with
// sa.pub.
func (cp *controlPlane) checkServiceAccountToken() {
	t := cp.t
	t.Helper()
	if _, err := cp.kubectl("create", "serviceaccount", "keys-proof", "-n", "default"); err != nil {
		t.Fatal(err)
	}
	tok, err := cp.kubectl("create", "token", "keys-proof", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No kubeconfig: the token alone, and the cluster's CA.
	out, err := cp.ns.Command(ctx, filepath.Join(cp.cl.Bin, "kubectl"), "--kubeconfig", "/dev/null",
		"--server", "https://"+cluster.Address+":6443", "--certificate-authority", filepath.Join(cp.cl.PKI, "ca.crt"),
		"--token", strings.TrimSpace(string(tok)), "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").CombinedOutput()
	if want := "system:serviceaccount:default:keys-proof"; err != nil || string(out) != want {
		t.Errorf("kubectl auth whoami with the service account's token: %q, %v; want %s", out, err, want)
	}
}

func volume(p *v1.Pod, name string) *v1.Volume {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == name {
			return &p.Spec.Volumes[i]
		}
	}
	return nil
}
