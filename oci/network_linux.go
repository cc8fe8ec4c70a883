//go:build linux && cgo

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// netFile in a pod's directory records the network attachment the sandbox
// asked for. It is written before ADD and removed (with the directory) only
// after DEL succeeded, so a daemon that dies in between leaves the next one
// what it needs to DEL: the configuration ADD ran with, the ID and the
// hostPorts. libcni's own cache (NetworkConfig.CacheDir) gives DEL the
// result ADD returned.
const netFile = "network.json"

// cniTimeout bounds one ADD, CHECK or DEL of a whole configuration list.
const cniTimeout = 2 * time.Minute

type netRecord struct {
	ID        string          `json:"id"` // CNI_CONTAINERID
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	UID       string          `json:"uid"`
	Source    string          `json:"source"` // the configuration file, or "default"
	Conf      json.RawMessage `json:"conf"`
	Ports     []portMapping   `json:"ports,omitempty"`
}

// network attaches sandboxes to the pod network with CNI.
type network struct {
	cfg    NetworkConfig
	cni    *libcni.CNIConfig
	log    *slog.Logger
	runDir string

	// mu serialises the hostPort check and the writing of netFile, so that
	// two pods asking for one port cannot both see it free.
	mu sync.Mutex

	noteMu sync.Mutex
	note   string // the last "no pod network" reason logged; guarded by noteMu
}

func newNetwork(cfg NetworkConfig, runDir string, log *slog.Logger) *network {
	return &network{
		cfg:    cfg,
		cni:    libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}}),
		log:    log,
		runDir: runDir,
	}
}

// conf is the pod network's configuration: the first file of ConfDir by
// name (the kubelet's and containerd's choice), else the built-in default
// network. A nil list with a reason: no pod network, loopback only.
func (n *network) conf() (list *libcni.NetworkConfigList, source, reason string, err error) {
	files, err := libcni.ConfFiles(n.cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, "", "", fmt.Errorf("read CNI configuration directory %s: %w", n.cfg.ConfDir, err)
	}
	sort.Strings(files)
	if len(files) > 0 {
		f := files[0]
		if strings.HasSuffix(f, ".conflist") {
			list, err = libcni.NetworkConfFromFile(f)
		} else {
			var c *libcni.PluginConfig
			if c, err = libcni.ConfFromFile(f); err == nil {
				list, err = libcni.ConfListFromConf(c)
			}
		}
		if err != nil {
			return nil, "", "", fmt.Errorf("CNI configuration %s: %w", f, err)
		}
		if len(list.Plugins) == 0 {
			return nil, "", "", fmt.Errorf("CNI configuration %s: no plugins", f)
		}
		return list, f, "", nil
	}
	var missing []string
	for _, p := range defaultNetworkPlugins {
		if _, err := invoke.FindInPath(p, n.cfg.BinDirs); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, "", fmt.Sprintf("no CNI configuration in %s and no CNI plugin %s in %s (install containernetworking-plugins): the pod has loopback only",
			n.cfg.ConfDir, strings.Join(missing, ", "), strings.Join(n.cfg.BinDirs, ", ")), nil
	}
	data, err := defaultNetworkConf(n.cfg.Bridge, n.cfg.Subnet, n.cfg.IPAMDir)
	if err != nil {
		return nil, "", "", err
	}
	if list, err = libcni.NetworkConfFromBytes(data); err != nil {
		return nil, "", "", fmt.Errorf("default pod network: %w", err)
	}
	return list, "default", "", nil
}

// noPodNetwork logs reason once, and again only when it changes.
func (n *network) noPodNetwork(reason string) {
	n.noteMu.Lock()
	defer n.noteMu.Unlock()
	if reason != n.note {
		n.note = reason
		n.log.Warn("pods without hostNetwork have no pod network", "reason", reason)
	}
}

func (rec *netRecord) runtimeConf(netns string) *libcni.RuntimeConf {
	// CNI_ARGS is "K=V;K=V" with no quoting: a value with ';' or '=' would
	// add arguments. Namespace and name are DNS names; a UID is a
	// manifest's own and passed only when CNI allows it as an ID.
	uid := rec.UID
	if cniContainerID(uid) != uid {
		uid = rec.ID
	}
	rt := &libcni.RuntimeConf{
		ContainerID: rec.ID,
		NetNS:       netns,
		IfName:      podIfName,
		// containerd's and the kubelet's CNI_ARGS.
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", rec.Namespace},
			{"K8S_POD_NAME", rec.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", rec.ID},
			{"K8S_POD_UID", uid},
		},
	}
	if len(rec.Ports) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": rec.Ports}
	}
	return rt
}

// attach connects the sandbox in dir (its network namespace made) to the
// pod network: ADD. The status has no IPs and says why when there is no pod
// network to attach to.
func (n *network) attach(ctx context.Context, dir string, pod *podspec.Pod) (podspec.SandboxStatus, error) {
	list, source, reason, err := n.conf()
	if err != nil {
		return podspec.SandboxStatus{}, err
	}
	if list == nil {
		n.noPodNetwork(reason)
		return podspec.SandboxStatus{Message: reason}, nil
	}
	rec := netRecord{
		ID: cniContainerID(pod.UID), Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		Source: source, Conf: list.Bytes, Ports: portMappings(pod.PortMappings),
	}
	if err := n.record(dir, &rec); err != nil {
		return podspec.SandboxStatus{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	res, err := n.cni.AddNetworkList(ctx, list, rec.runtimeConf(filepath.Join(dir, nsNet)))
	if err != nil {
		return podspec.SandboxStatus{}, fmt.Errorf("add pod to network %s (%s): %w", list.Name, source, err)
	}
	ips, err := resultIPs(res)
	if err != nil {
		return podspec.SandboxStatus{}, fmt.Errorf("add pod to network %s (%s): %w", list.Name, source, err)
	}
	return podspec.SandboxStatus{IPs: ips, Network: list.Name}, nil
}

// record checks rec's hostPorts against every other sandbox's and writes
// rec into dir.
func (n *network) record(dir string, rec *netRecord) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(rec.Ports) > 0 {
		others, _ := filepath.Glob(filepath.Join(n.runDir, podsDir, "*", netFile))
		for _, p := range others {
			if filepath.Dir(p) == dir {
				continue
			}
			var o netRecord
			if err := readJSON(p, &o); err != nil {
				continue // being written or removed
			}
			if t, ok := portConflict(rec.Ports, o.Ports); ok {
				on := "every address"
				if t.HostIP != "" {
					on = t.HostIP
				}
				return fmt.Errorf("hostPort %d/%s: already published on %s by pod %s/%s", t.HostPort, strings.ToUpper(t.Protocol), on, o.Namespace, o.Name)
			}
		}
	}
	return writeJSON(filepath.Join(dir, netFile), rec)
}

// resultIPs are the addresses of a CNI result, IPv4 first.
func resultIPs(res cnitypes.Result) ([]netip.Addr, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	var ips []netip.Addr
	for _, c := range r.IPs {
		// Only the pod's own interface's addresses, when the result says
		// which is which.
		if c.Interface != nil && *c.Interface >= 0 && *c.Interface < len(r.Interfaces) {
			if i := r.Interfaces[*c.Interface]; i.Sandbox == "" || i.Name != podIfName {
				continue
			}
		}
		if a, ok := netip.AddrFromSlice(c.Address.IP); ok {
			ips = append(ips, a.Unmap())
		}
	}
	slices.SortStableFunc(ips, func(a, b netip.Addr) int {
		if a.Is4() == b.Is4() {
			return 0
		}
		if a.Is4() {
			return -1
		}
		return 1
	})
	return ips, nil
}

// detach runs DEL for the sandbox in dir, if an attachment was recorded.
// The namespace is given when it is still there; a plugin cleans up its
// host side without it.
func (n *network) detach(ctx context.Context, dir string) error {
	var rec netRecord
	ok, err := readOptionalJSON(filepath.Join(dir, netFile), &rec)
	if err != nil || !ok {
		return err
	}
	list, err := libcni.NetworkConfFromBytes(rec.Conf)
	if err != nil {
		return fmt.Errorf("recorded network configuration: %w", err)
	}
	netns := filepath.Join(dir, nsNet)
	if !isNsfs(netns) {
		netns = ""
	}
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	if err := n.cni.DelNetworkList(ctx, list, rec.runtimeConf(netns)); err != nil {
		return fmt.Errorf("remove pod from network %s (%s): %w", list.Name, rec.Source, err)
	}
	return os.Remove(filepath.Join(dir, netFile))
}

// check runs CHECK for the sandbox in dir, if an attachment was recorded
// and its configuration allows it.
func (n *network) check(ctx context.Context, dir string) error {
	var rec netRecord
	ok, err := readOptionalJSON(filepath.Join(dir, netFile), &rec)
	if err != nil || !ok {
		return err
	}
	list, err := libcni.NetworkConfFromBytes(rec.Conf)
	if err != nil {
		return fmt.Errorf("recorded network configuration: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	err = n.cni.CheckNetworkList(ctx, list, rec.runtimeConf(filepath.Join(dir, nsNet)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check pod network %s (%s): %w", list.Name, rec.Source, err)
	}
	return nil
}

// isNsfs reports whether path is a namespace (a bind mount of one).
func isNsfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}
