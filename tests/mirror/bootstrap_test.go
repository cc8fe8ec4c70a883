//go:build controlplane

package mirror

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/staticpodd/staticpodd/tests/kubeapi"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The bootstrap token kubeadm would make (token-id.token-secret), and the
// group its auth-extra-groups puts it in.
const (
	bootstrapToken = "abcdef.0123456789abcdef"
	bootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"
)

// kubeadmBootstrapRBAC is what kubeadm init's bootstrap-token phase
// creates for TLS bootstrap: the token's Secret and the three
// ClusterRoleBindings that let it ask for a node certificate and have
// kube-controller-manager approve it, and the nodes renew theirs.
func kubeadmBootstrapRBAC(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	_, err := admin.CoreV1().Secrets("kube-system").Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
		Type:       "bootstrap.kubernetes.io/token",
		StringData: map[string]string{
			"token-id": "abcdef", "token-secret": "0123456789abcdef",
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": bootstrapGroup,
			"expiration":        time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]struct{ role, group string }{
		"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", bootstrapGroup},
		"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrapGroup},
		"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// currentCert is the certificate kubelet-client-current.pem holds, and the
// file the symlink points to.
func currentCert(certDir string) (*x509.Certificate, string, error) {
	path := filepath.Join(certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(path)
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return nil, "", fmt.Errorf("%s holds no certificate", path)
		}
		if b.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(b.Bytes)
			return cert, target, err
		}
	}
}

// A daemon given only a bootstrap token (kubeadm join's
// bootstrap-kubelet.conf) gets its client certificate through a CSR that
// kube-controller-manager approves and signs, writes kubelet.conf to use it,
// registers its Node and makes its mirror pods; its 2-minute certificate is
// rotated before it expires, and the Node and its Lease keep being updated
// with the new one after the first has expired.
func TestTLSBootstrapAndRotation(t *testing.T) {
	c := kubeapi.New(t)
	c.EnableBootstrapTokens()
	c.StartAPIServer()
	c.WaitReady(90 * time.Second)
	kubeadmBootstrapRBAC(t, c.Admin)
	// The shortest lifetime that still rotates before expiry: the signer
	// backdates by 5 minutes, the manager rotates at 70-90% of the whole.
	kcm := c.StartControllerManager("--cluster-signing-duration", "2m")

	d := testdaemon.New(t)
	boot := filepath.Join(d.Dir, "bootstrap-kubelet.conf")
	if err := os.WriteFile(boot, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: tls-bootstrap-token-user, user: {token: %q}}]
contexts: [{name: tls-bootstrap-token-user@test, context: {cluster: test, user: tls-bootstrap-token-user}}]
current-context: tls-bootstrap-token-user@test
`, c.Server(), c.PKI.CA, bootstrapToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(cfg, "rotateCertificates: true\nnodeStatusUpdateFrequency: 3s\nnodeLeaseDurationSeconds: 12\n")
	cfg.Close()
	kubeconfig := filepath.Join(d.Dir, "etc", "kubelet.conf")
	certDir := filepath.Join(d.Dir, "pki")
	d.Args = append(d.Args, "--bootstrap-kubeconfig", boot, "--kubeconfig", kubeconfig, "--cert-dir", certDir, "--node-ip", "127.0.0.1")
	f := &fixture{t: t, c: c, d: d}
	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.Start()
	f.waitGeneration("web", "1")

	// The certificate, the kubeconfig pointing at it, the Node, the mirror pod.
	var first *x509.Certificate
	var firstFile string
	d.Eventually(60*time.Second, "a client certificate in "+certDir, func() error {
		var err error
		first, firstFile, err = currentCert(certDir)
		if err != nil {
			return fmt.Errorf("%v\nkube-controller-manager:\n%s", err, kcm.Tail())
		}
		return nil
	})
	if first.Subject.CommonName != "system:node:"+d.Name || len(first.Subject.Organization) != 1 || first.Subject.Organization[0] != "system:nodes" {
		t.Errorf("certificate subject %v", first.Subject)
	}
	if fi, err := os.Stat(filepath.Join(certDir, "kubelet-client-current.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("certificate and key mode %v (%v), want 0600", fi.Mode(), err)
	}
	loaded, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	if auth := loaded.AuthInfos[loaded.Contexts[loaded.CurrentContext].AuthInfo]; auth.ClientCertificate != filepath.Join(certDir, "kubelet-client-current.pem") {
		t.Errorf("kubeconfig's user %+v, want the certificate store's current file", auth)
	}
	f.waitMirror("web", 60*time.Second, "the mirror pod running", running)
	ctx := context.Background()
	csrs, err := c.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byBootstrap := 0
	for _, csr := range csrs.Items {
		if csr.Spec.Username == "system:bootstrap:abcdef" && csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
			byBootstrap++
		}
	}
	if byBootstrap != 1 {
		t.Errorf("%d CSRs of the bootstrap token, want 1: %+v", byBootstrap, csrs.Items)
	}

	t.Logf("first certificate: serial %s, %v to %v, %s", first.SerialNumber, first.NotBefore, first.NotAfter, firstFile)

	// Rotation, before expiry, with the node's own certificate.
	d.Eventually(2*time.Minute, "the certificate rotated", func() error {
		cur, file, err := currentCert(certDir)
		if err != nil {
			return err
		}
		if file == firstFile || cur.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return fmt.Errorf("still %s (serial %s, expires %v)", file, cur.SerialNumber, cur.NotAfter)
		}
		t.Logf("rotated at %v: serial %s, %v to %v, %s", time.Now(), cur.SerialNumber, cur.NotBefore, cur.NotAfter, file)
		return nil
	})
	if time.Now().After(first.NotAfter) {
		t.Errorf("rotated after the first certificate expired (%v)", first.NotAfter)
	}
	csrs, err = c.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byNode := 0
	for _, csr := range csrs.Items {
		if csr.Spec.Username == "system:node:"+d.Name {
			byNode++
		}
	}
	if byNode == 0 {
		t.Errorf("no CSR sent with the node's own certificate")
	}

	// The first certificate has expired: the API server refuses it, so the
	// Lease and the Node's status updated after that came with a newer one.
	time.Sleep(time.Until(first.NotAfter))
	d.Eventually(30*time.Second, "the Lease and the Node updated after the first certificate expired", func() error {
		l, err := c.Admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.Time.After(first.NotAfter) {
			return fmt.Errorf("lease renewed %v, not after %v", l.Spec.RenewTime.Time, first.NotAfter)
		}
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.LastHeartbeatTime.Time.After(first.NotAfter) {
				return nil
			}
		}
		return fmt.Errorf("node conditions %+v", n.Status.Conditions)
	})
	// And the mirror pods follow a change, through the new certificate.
	d.WriteManifest("web.yaml", sleeper("web", "2"))
	f.waitGeneration("web", "2")
	f.waitMirror("web", 60*time.Second, "the mirror pod of generation 2", func(p *v1.Pod) error {
		if env := p.Spec.Containers[0].Env; len(env) == 0 || env[0].Value != "2" {
			return fmt.Errorf("mirror pod env %+v", env)
		}
		return running(p)
	})
}

// kubeadm init's sequence: the daemon starts with kubelet.conf holding the
// node's certificate embedded and rotateCertificates on; the certificate
// is stored as kubelet-client-current.pem and rotated out with a CSR sent
// with it (kubeadm:node-autoapprove-certificate-rotation); kubeadm's
// kubelet-finalize phase then points kubelet.conf at that file and
// restarts the daemon, which goes on with the rotated certificate.
func TestKubeadmInitCertificateRotation(t *testing.T) {
	c := kubeapi.New(t)
	c.StartAPIServer()
	c.WaitReady(90 * time.Second)
	kubeadmBootstrapRBAC(t, c.Admin)
	c.StartControllerManager()

	d := testdaemon.New(t)
	crtFile, keyFile := c.PKI.Issue(t, "kubelet-"+d.Name, "system:node:"+d.Name, []string{"system:nodes"}, false)
	crt, err := os.ReadFile(crtFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	embedded, _ := pem.Decode(crt)
	kubeconfig := filepath.Join(d.Dir, "etc", "kubelet.conf")
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: node, user: {client-certificate-data: %s, client-key-data: %s}}]
contexts: [{name: node, context: {cluster: test, user: node}}]
current-context: node
`, c.Server(), c.PKI.CA, base64.StdEncoding.EncodeToString(crt), base64.StdEncoding.EncodeToString(key))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(cfg, "rotateCertificates: true\nnodeLeaseDurationSeconds: 12\n")
	cfg.Close()
	certDir := filepath.Join(d.Dir, "pki")
	d.Args = append(d.Args, "--kubeconfig", kubeconfig, "--cert-dir", certDir, "--node-ip", "127.0.0.1")
	f := &fixture{t: t, c: c, d: d}
	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.Start()
	f.waitMirror("web", 60*time.Second, "the mirror pod running", running)

	var rotated *x509.Certificate
	d.Eventually(60*time.Second, "the embedded certificate stored and rotated out", func() error {
		cur, _, err := currentCert(certDir)
		if err != nil {
			return err
		}
		if string(cur.Raw) == string(mustParse(t, embedded.Bytes).Raw) {
			return fmt.Errorf("kubelet-client-current.pem still the embedded certificate")
		}
		rotated = cur
		return nil
	})
	if rotated.Subject.CommonName != "system:node:"+d.Name {
		t.Errorf("rotated certificate subject %v", rotated.Subject)
	}

	// kubelet-finalize: kubelet.conf points at the store; restart.
	pemPath := filepath.Join(certDir, "kubelet-client-current.pem")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: node, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: node, context: {cluster: test, user: node}}]
current-context: node
`, c.Server(), c.PKI.CA, pemPath, pemPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	d.Start()
	restarted := time.Now()
	ctx := context.Background()
	d.Eventually(30*time.Second, "the Lease renewed after the restart", func() error {
		l, err := c.Admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.Time.After(restarted) {
			return fmt.Errorf("lease renewed %v", l.Spec.RenewTime.Time)
		}
		return nil
	})
	if cur, _, err := currentCert(certDir); err != nil || cur.SerialNumber.Cmp(rotated.SerialNumber) != 0 {
		t.Errorf("after the restart the store holds %v (%v), want the rotated certificate %s kept", cur, err, rotated.SerialNumber)
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
