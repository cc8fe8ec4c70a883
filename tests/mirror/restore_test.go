//go:build controlplane

package mirror

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An API server whose etcd is restored from a backup gives its objects
// again at older resourceVersions: the node's agent takes the Node as it
// is now, not the newer-looking one it knew. Here the backup's Node is
// schedulable, and is cordoned again, with the same UID.
func TestNodeAfterEtcdRestoredFromABackup(t *testing.T) {
	f := newFixture(t)
	d, c := f.d, f.c
	ctx := context.Background()
	nodes := c.Admin.CoreV1().Nodes()
	// The backup's Node: schedulable, made before the daemon starts.
	made, err := nodes.Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	backup := t.TempDir() + "/etcd"
	c.APIServer.Kill()
	c.Etcd.Kill()
	if out, err := exec.Command("cp", "-a", c.EtcdDataDir(), backup).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v: %s", err, out)
	}
	c.StartEtcd()
	c.StartAPIServer()
	c.WaitReady(90 * time.Second)

	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.Start()
	f.waitMirror("web", 30*time.Second, "the mirror pod running", running)
	d.Eventually(30*time.Second, "the node cordoned", func() error {
		n, err := nodes.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !n.Spec.Unschedulable {
			return errors.New("schedulable")
		}
		return nil
	})

	// The restore.
	c.APIServer.Kill()
	c.Etcd.Kill()
	if err := os.RemoveAll(c.EtcdDataDir()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, c.EtcdDataDir()).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v: %s", err, out)
	}
	c.StartEtcd()
	c.StartAPIServer()
	c.WaitReady(90 * time.Second)
	if n, err := nodes.Get(ctx, d.Name, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable || n.UID != made.UID {
		t.Fatalf("the restored node %v %v, want the backup's, schedulable", n, err)
	}
	d.Eventually(60*time.Second, "the restored node cordoned again", func() error {
		n, err := nodes.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !n.Spec.Unschedulable {
			return errors.New("schedulable")
		}
		return nil
	})
	f.waitMirror("web", 60*time.Second, "the mirror pod made again", running)
}

// An API server whose etcd is wiped: the Node is registered again, with
// another UID, its Lease made again, and the mirror pod made again owned
// by the new Node.
func TestNodeAfterEtcdWiped(t *testing.T) {
	f := newFixture(t)
	d, c := f.d, f.c
	ctx := context.Background()
	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.Start()
	f.waitMirror("web", 30*time.Second, "the mirror pod running", running)
	old, err := c.Admin.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	c.APIServer.Kill()
	c.Etcd.Kill()
	if err := os.RemoveAll(c.EtcdDataDir()); err != nil {
		t.Fatal(err)
	}
	c.StartEtcd()
	c.StartAPIServer()
	c.WaitReady(90 * time.Second)
	var node *v1.Node
	d.Eventually(60*time.Second, "the node registered again", func() error {
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.UID == old.UID {
			return errors.New("the old UID")
		}
		node = n
		return nil
	})
	f.waitMirror("web", 60*time.Second, "the mirror pod made again, owned by the new Node", func(p *v1.Pod) error {
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != node.UID {
			return errors.New("not owned by the new Node")
		}
		return running(p)
	})
	d.Eventually(30*time.Second, "the lease made again", func() error {
		_, err := c.Admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, d.Name, metav1.GetOptions{})
		return err
	})
}
