package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/host"
)

// KubeletVersion is what the Node reports as nodeInfo.kubeletVersion: the
// kubelet release whose static-pod, mirror-pod and node-status behaviour
// staticpodd follows, so that version-skew checks of the control plane
// (kubeadm's among them) judge it as that kubelet. staticpodd's own version
// is in containerRuntimeVersion.
const KubeletVersion = "v1.37.2"

// nodeUID waits until the Node is known and returns its UID; false when
// ctx ended first.
func (m *Mirror) nodeUID(ctx context.Context) (types.UID, bool) {
	for {
		m.nodeMu.Lock()
		set, node := m.nodeSet, m.node
		m.nodeMu.Unlock()
		if node != nil {
			return node.UID, true
		}
		select {
		case <-set:
		case <-ctx.Done():
			return "", false
		}
	}
}

// setNode remembers the Node, as read, written or watched, unless what it
// knows of the same Node is newer: the watch and the status loop each give
// it theirs, in either order.
func (m *Mirror) setNode(n *v1.Node) {
	m.nodeMu.Lock()
	defer m.nodeMu.Unlock()
	if cur := m.node; cur != nil && cur.UID == n.UID && newerRV(cur.ResourceVersion, n.ResourceVersion) {
		return
	}
	m.replaceNodeLocked(n)
}

// replaceNode remembers the Node as listed, whatever is known.
func (m *Mirror) replaceNode(n *v1.Node) {
	m.nodeMu.Lock()
	defer m.nodeMu.Unlock()
	m.replaceNodeLocked(n)
}

func (m *Mirror) replaceNodeLocked(n *v1.Node) {
	if m.node == nil {
		close(m.nodeSet)
	}
	m.node = n
}

// forgetNode drops the Node known: it was deleted, and is registered again.
// The watch and the status loop may both tell it: forgetting it again keeps
// the channel nodeUID's callers wait on.
func (m *Mirror) forgetNode() {
	m.nodeMu.Lock()
	defer m.nodeMu.Unlock()
	if m.node == nil {
		return
	}
	m.node = nil
	m.nodeSet = make(chan struct{})
}

// forgetNodeOf forgets the Node known if it is the one of uid.
func (m *Mirror) forgetNodeOf(uid types.UID) {
	m.nodeMu.Lock()
	known := m.node != nil && m.node.UID == uid
	m.nodeMu.Unlock()
	if known {
		m.forgetNode()
	}
}

// cordon marks the Node unschedulable again when someone made it schedulable
// (kubectl uncordon, as the kubeadm upgrade guide's last step is): staticpodd
// runs static pods only, so a pod the scheduler put here would only be failed
// by the rejecter, and a ReplicaSet would make it again at once, forever.
// It records NodeNotSchedulable, as the kubelet's recordNodeSchedulableEvent.
func (m *Mirror) cordon(ctx context.Context, nodes nodesAPI, n *v1.Node) (*v1.Node, error) {
	if n.Spec.Unschedulable || m.cfg.RegisterSchedulable {
		return n, nil
	}
	cordoned, err := nodes.Patch(ctx, m.cfg.NodeName, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("mark node %s unschedulable: %s", m.cfg.NodeName, oneLine(err))
	}
	m.logger.Warn("the node was schedulable: marked it unschedulable, staticpodd runs only static pods", "node", m.cfg.NodeName)
	m.pods.Events().Eventf(events.NodeRef(m.cfg.NodeName), v1.EventTypeNormal, events.NodeNotSchedulable,
		"Node %s status is now: %s", m.cfg.NodeName, events.NodeNotSchedulable)
	m.setNode(cordoned)
	return cordoned, nil
}

// runNode registers the Node when it is missing (the kubelet's
// registerWithAPIServer) and keeps its status (updateNodeStatus): computed
// every NodeStatusUpdateFrequency, posted when it changed or
// NodeStatusReportFrequency passed.
func (m *Mirror) runNode(ctx context.Context, client api) {
	bo := newBackoff(200*time.Millisecond, 10*time.Second)
	var lastPosted v1.NodeStatus
	var lastPost time.Time
	for {
		wait := m.cfg.NodeStatusUpdateFrequency
		if err := m.syncNode(ctx, client, &lastPosted, &lastPost); err != nil {
			m.report("node", err)
			wait = bo.next()
		} else {
			m.report("node", nil)
			bo.reset()
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

func (m *Mirror) syncNode(ctx context.Context, client api, lastPosted *v1.NodeStatus, lastPost *time.Time) error {
	nodes := client.Nodes()
	n, err := m.readNode(ctx, nodes)
	if err != nil {
		return err
	}
	cur, err := m.cordon(ctx, nodes, n)
	if err != nil {
		return err
	}
	status := m.nodeStatus(cur)
	if statusEqual(*lastPosted, status) && time.Since(*lastPost) < m.cfg.NodeStatusReportFrequency {
		return nil
	}
	now := metav1.Now()
	for i := range status.Conditions {
		c := &status.Conditions[i]
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now
		for _, old := range cur.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("encode node status: %w", err)
	}
	n, err = nodes.Patch(ctx, m.cfg.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		// Deleted behind our back: register it again at the next round.
		m.forgetNode()
		return fmt.Errorf("update node %s status: the node was deleted; registering it again", m.cfg.NodeName)
	}
	if err != nil {
		return fmt.Errorf("update node %s status: %s", m.cfg.NodeName, oneLine(err))
	}
	m.setNode(n)
	*lastPosted, *lastPost = status, time.Now()
	return nil
}

// readNode is the Node as the watch keeps it or, while no watch runs, read
// from the API server's cache, as the kubelet's tryUpdateNodeStatus reads
// its lister: someone may have made it schedulable. A missing Node is
// registered.
func (m *Mirror) readNode(ctx context.Context, nodes nodesAPI) (*v1.Node, error) {
	if n := m.watchedNode(); n != nil {
		return n, nil
	}
	m.nodeMu.Lock()
	known := m.node != nil
	m.nodeMu.Unlock()
	n, err := nodes.Get(ctx, m.cfg.NodeName, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err) && known:
		m.forgetNode()
		return nil, fmt.Errorf("get node %s: the node was deleted; registering it again", m.cfg.NodeName)
	case apierrors.IsNotFound(err) && m.cfg.RegisterNode:
		if n, err = nodes.Create(ctx, m.initialNode(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("register node %s: %s", m.cfg.NodeName, oneLine(err))
		} else if err != nil {
			return nil, fmt.Errorf("register node %s: it appeared meanwhile; reading it next", m.cfg.NodeName)
		}
		m.logger.Info("registered the node", "node", m.cfg.NodeName, "uid", n.UID)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("node %s is not registered and registerNode is false", m.cfg.NodeName)
	case err != nil:
		return nil, fmt.Errorf("get node %s: %s", m.cfg.NodeName, oneLine(err))
	}
	m.setNode(n)
	return n, nil
}

// statusEqual compares two computed statuses, without heartbeat times.
func statusEqual(a, b v1.NodeStatus) bool {
	strip := func(s v1.NodeStatus) string {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		js, _ := json.Marshal(s)
		return string(js)
	}
	return strip(a) == strip(b)
}

// initialNode is the Node as the kubelet's initialNode makes it.
func (m *Mirror) initialNode() *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.cfg.NodeName,
			Labels: map[string]string{
				v1.LabelHostname:   m.cfg.NodeName,
				v1.LabelOSStable:   runtime.GOOS,
				v1.LabelArchStable: runtime.GOARCH,
			},
		},
		// Unschedulable, as the kubelet registered with
		// --register-schedulable=false: the scheduler places no pod on a
		// node that runs static pods only.
		Spec: v1.NodeSpec{Taints: m.cfg.RegisterWithTaints, Unschedulable: !m.cfg.RegisterSchedulable},
	}
	// The kubelet's initialNode: --node-labels win over the defaults, and
	// are set at registration only.
	maps.Copy(n.Labels, m.cfg.NodeLabels)
	n.Status = m.nodeStatus(n)
	return n
}

// nodeStatus is what the Node's status says now.
func (m *Mirror) nodeStatus(cur *v1.Node) v1.NodeStatus {
	var s v1.NodeStatus
	if ip := m.cfg.NodeIP; ip.IsValid() {
		s.Addresses = append(s.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	s.Addresses = append(s.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: m.cfg.Hostname})
	s.DaemonEndpoints.KubeletEndpoint.Port = m.cfg.KubeletPort
	s.Capacity = m.capacity()
	s.Allocatable = allocatable(s.Capacity, m.evictionHardNow())
	// No room for a pod the scheduler would place: it counts the mirror
	// pods, so a pod that tolerates the unschedulable taint (one tolerating
	// every taint) is not placed here either, but stays Pending with the
	// scheduler's "Too many pods". A window while a static pod goes is
	// closed by the rejecter.
	s.Allocatable[v1.ResourcePods] = *resource.NewQuantity(min(m.activeStaticPods(), m.cfg.MaxPods), resource.DecimalSI)
	s.NodeInfo = m.nodeInfo(cur)
	s.Conditions = m.conditions()
	return s
}

func (m *Mirror) capacity() v1.ResourceList {
	c := v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(m.cfg.MaxPods, resource.DecimalSI),
	}
	if mem, err := host.ReadMemory(host.Meminfo); err == nil {
		c[v1.ResourceMemory] = *resource.NewQuantity(int64(mem.Total), resource.BinarySI)
	}
	if m.cfg.RootDir != "" {
		var st unix.Statfs_t
		if unix.Statfs(m.cfg.RootDir, &st) == nil {
			c[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI)
		}
	}
	return c
}

// allocatable is capacity less the hard eviction thresholds (the kubelet's
// GetNodeAllocatableReservation with no kube or system reservation).
func allocatable(capacity v1.ResourceList, hard map[string]string) v1.ResourceList {
	out := capacity.DeepCopy()
	sub := func(name v1.ResourceName, threshold string) {
		q, ok := out[name]
		if !ok || threshold == "" {
			return
		}
		var r resource.Quantity
		if pct, ok := strings.CutSuffix(threshold, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil {
				return
			}
			r = *resource.NewQuantity(int64(float64(q.Value())*f/100), resource.BinarySI)
		} else if p, err := resource.ParseQuantity(threshold); err == nil {
			r = p
		} else {
			return
		}
		q.Sub(r)
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, resource.BinarySI)
		}
		out[name] = q
	}
	sub(v1.ResourceMemory, hard["memory.available"])
	sub(v1.ResourceEphemeralStorage, hard["nodefs.available"])
	return out
}

func (m *Mirror) nodeInfo(cur *v1.Node) v1.NodeSystemInfo {
	info := v1.NodeSystemInfo{
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
		KernelVersion:           kernelVersion(),
		OSImage:                 osImage(),
		ContainerRuntimeVersion: "staticpodd://" + m.cfg.Version,
		KubeletVersion:          KubeletVersion,
		MachineID:               readTrim("/etc/machine-id"),
		BootID:                  readTrim("/proc/sys/kernel/random/boot_id"),
		SystemUUID:              readTrim("/sys/class/dmi/id/product_uuid"),
	}
	if cur != nil && cur.Status.NodeInfo.KubeProxyVersion != "" {
		info.KubeProxyVersion = cur.Status.NodeInfo.KubeProxyVersion
	}
	return info
}

// conditions are Ready and the pressure conditions, False unless the
// NodeConditions say otherwise.
func (m *Mirror) conditions() []v1.NodeCondition {
	out := []v1.NodeCondition{}
	have := map[v1.NodeConditionType]bool{}
	if m.cfg.Conditions != nil {
		for _, c := range m.cfg.Conditions.PressureConditions() {
			out = append(out, c)
			have[c.Type] = true
		}
	}
	for _, p := range []struct {
		t      v1.NodeConditionType
		reason string
		msg    string
	}{
		{v1.NodeMemoryPressure, "KubeletHasSufficientMemory", "staticpodd has sufficient memory available"},
		{v1.NodeDiskPressure, "KubeletHasNoDiskPressure", "staticpodd has no disk pressure"},
		{v1.NodePIDPressure, "KubeletHasSufficientPID", "staticpodd has sufficient PID available"},
	} {
		if !have[p.t] {
			out = append(out, v1.NodeCondition{Type: p.t, Status: v1.ConditionFalse, Reason: p.reason, Message: p.msg})
		}
	}
	out = append(out, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "staticpodd is posting ready status"})
	return out
}

// runLease keeps kube-node-lease/<node> renewed every quarter of its
// duration, as the kubelet's node lease controller does, retrying sooner
// after a failure.
func (m *Mirror) runLease(ctx context.Context, client api) {
	if _, ok := m.nodeUID(ctx); !ok {
		return
	}
	interval := m.cfg.NodeLeaseDuration / 4
	bo := newBackoff(200*time.Millisecond, interval)
	var latest *coordinationv1.Lease
	for {
		wait := interval
		l, err := m.renewLease(ctx, client, latest)
		if err != nil {
			m.report("lease", err)
			wait = bo.next()
		} else {
			m.report("lease", nil)
			bo.reset()
		}
		latest = l
		if !sleep(ctx, wait) {
			return
		}
	}
}

// renewLease renews the Lease and returns it as written, nil after a
// failure. With latest, the Lease as last written, it is updated from that
// without reading it first, as the kubelet's lease controller does: nobody
// else writes a node's Lease, so that is one request a renewal instead of
// two, and only a conflict (someone did write it) or a failure costs the
// read.
func (m *Mirror) renewLease(ctx context.Context, client api, latest *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := client.Leases(v1.NamespaceNodeLease)
	m.nodeMu.Lock()
	node := m.node
	m.nodeMu.Unlock()
	renew := func(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		l = l.DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity = ptr.To(m.cfg.NodeName)
		l.Spec.LeaseDurationSeconds = ptr.To(int32(m.cfg.NodeLeaseDuration / time.Second))
		l.Spec.RenewTime = &now
		if node != nil && len(l.OwnerReferences) == 0 {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		return leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if latest != nil {
		if l, err := renew(latest); err == nil {
			return l, nil
		}
		// Written or deleted by someone else, or failed: read it again.
	}
	l, err := leases.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		now := metav1.NewMicroTime(time.Now())
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName, Namespace: v1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(m.cfg.NodeName),
				LeaseDurationSeconds: ptr.To(int32(m.cfg.NodeLeaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}
		if node != nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		created, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create lease %s/%s: %s", v1.NamespaceNodeLease, m.cfg.NodeName, oneLine(err))
		}
		return created, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s/%s: %s", v1.NamespaceNodeLease, m.cfg.NodeName, oneLine(err))
	}
	updated, err := renew(l)
	if err != nil {
		return nil, fmt.Errorf("renew lease %s/%s: %s", v1.NamespaceNodeLease, m.cfg.NodeName, oneLine(err))
	}
	return updated, nil
}

// kernelVersion is uname -r, "" if unknown.
func kernelVersion() string {
	r, _ := host.KernelRelease()
	return r
}

// osImage is PRETTY_NAME of os-release, as the kubelet's cadvisor reports it.
func osImage() string {
	for _, path := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				return strings.Trim(v, `"'`)
			}
		}
	}
	return "Linux"
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
