//go:build linux && cgo

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
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
	// Masquerade is the default network's rule this attachment needs
	// (deleted after the range's last DEL).
	Masquerade *masqRule `json:"masquerade,omitempty"`
}

// Network attaches sandboxes to the pod network with CNI.
type Network struct {
	cfg    NetworkConfig
	cni    *libcni.CNIConfig
	log    *slog.Logger
	runDir string

	// mu serialises the hostPort check and the writing of netFile, so that
	// two pods asking for one port cannot both see it free, and the adding
	// and deleting of masquerade rules with the records that need them.
	mu sync.Mutex
	// masq are the masquerade rules this daemon added or found there since
	// it started, and has not deleted since; guarded by mu.
	masq map[masqRule]bool
	// plugins lets one exclusive ADD, DEL or CHECK run at a time; see
	// exclusive.
	plugins chan struct{}

	noIptables sync.Once // logs the masquerade's missing iptables

	noteMu sync.Mutex
	note   string // the last "no pod network" reason logged; guarded by noteMu
}

// NewNetwork returns the pod network cfg describes, for the sandboxes under
// runDir (all of which it reads to keep two pods off one hostPort).
func NewNetwork(cfg NetworkConfig, runDir string, log *slog.Logger) *Network {
	return &Network{
		cfg:     cfg,
		cni:     libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, newPluginExec(log)),
		log:     log,
		runDir:  runDir,
		plugins: make(chan struct{}, 1),
		masq:    map[masqRule]bool{},
	}
}

// iptablesLock is the file every staticpodd of the machine holds while it
// changes iptables rules, itself or through a CNI plugin. In /run, which
// only root writes, as iptables' own /run/xtables.lock: not in /run/lock,
// where any user could make it first and hold it.
const iptablesLock = "/run/staticpodd-iptables.lock"

// exclusive runs fn, which changes iptables rules, alone: no other such
// change of this daemon, nor of another staticpodd on the machine, runs
// meanwhile. iptables-nft (Debian's iptables) does not take the xtables
// lock, and a plugin that rewrites the nat table while another does can
// fail half-way. Waiting for the lock counts in ctx.
func (n *Network) exclusive(ctx context.Context, fn func() error) error {
	select {
	case n.plugins <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-n.plugins }()
	if err := os.MkdirAll(filepath.Dir(iptablesLock), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(iptablesLock, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("iptables lock: %w", err)
	}
	defer f.Close() // releases the lock
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("iptables lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the iptables lock %s, which another process holds: %w", iptablesLock, context.Cause(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fn()
}

// touchesIptables reports whether list may change iptables rules: any
// plugin but the ones the default network runs without hostPorts, whose
// ADD and DEL change interfaces, addresses and routes only.
func touchesIptables(list *libcni.NetworkConfigList) bool {
	for _, p := range list.Plugins {
		switch p.Network.Type {
		case "bridge", "host-local", "loopback":
			var c struct {
				IPMasq bool `json:"ipMasq"`
			}
			if json.Unmarshal(p.Bytes, &c) != nil || c.IPMasq {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// runPlugins runs fn, a CNI operation on list, alone when list may change
// iptables rules.
func (n *Network) runPlugins(ctx context.Context, list *libcni.NetworkConfigList, fn func() error) error {
	if touchesIptables(list) {
		return n.exclusive(ctx, fn)
	}
	return fn()
}

// conf is the pod network's configuration: the first file of ConfDir by
// name (the kubelet's and containerd's choice), else the built-in default
// network (with portmap when the pod has hostPorts). A nil list with a
// reason: no pod network, loopback only.
func (n *Network) conf(hostPorts bool) (list *libcni.NetworkConfigList, source, reason string, err error) {
	files, err := libcni.ConfFiles(n.cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, "", "", fmt.Errorf("read CNI configuration directory %s: %w", n.cfg.ConfDir, err)
	}
	sort.Strings(files)
	if len(files) > 0 {
		f := files[0]
		var data []byte
		data, err = readCNIConf(f)
		switch {
		case err != nil:
		case strings.HasSuffix(f, ".conflist"):
			list, err = conflist(f, data)
		default:
			var c *libcni.PluginConfig
			if c, err = libcni.ConfFromBytes(data); err == nil {
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
	data, err := defaultNetworkConf(n.cfg.Bridge, n.cfg.Subnet, n.cfg.IPAMDir, hostPorts)
	if err != nil {
		return nil, "", "", err
	}
	if list, err = libcni.NetworkConfFromBytes(data); err != nil {
		return nil, "", "", fmt.Errorf("default pod network: %w", err)
	}
	return list, "default", "", nil
}

// conflist is the network list of .conflist file path, whose content is
// data, with the plugins of its network's directory beside it unless it
// has them all inline, as libcni.NetworkConfFromFile reads it, each file
// read by readCNIConf.
func conflist(path string, data []byte) (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil || list.LoadOnlyInlinedPlugins {
		return list, err
	}
	dir := filepath.Join(filepath.Dir(path), list.Name)
	files, err := libcni.ConfFiles(dir, []string{".conf"})
	if err != nil {
		return nil, fmt.Errorf("read plugin configurations in %s: %w", dir, err)
	}
	for _, f := range files {
		b, err := readCNIConf(f)
		if err != nil {
			return nil, fmt.Errorf("plugin configuration %s: %w", f, err)
		}
		p, err := libcni.NetworkPluginConfFromBytes(b)
		if err != nil {
			return nil, fmt.Errorf("plugin configuration %s: %w", f, err)
		}
		list.Plugins = append(list.Plugins, p)
	}
	return list, nil
}

// maxCNIConf bounds a CNI configuration file: a few KiB in practice.
const maxCNIConf = 1 << 20

// readCNIConf reads CNI configuration file path: a regular file of at most
// maxCNIConf bytes, opened without blocking. The directory is read again
// at each pod's status (chosen), at every sync, and a pod that mounts it
// to install its network's configuration could otherwise put a FIFO there
// that stalls every sync, or a link to /dev/zero.
func readCNIConf(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	case fi.Size() > maxCNIConf:
		return nil, fmt.Errorf("%d bytes, more than %d", fi.Size(), maxCNIConf)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCNIConf+1))
	if err == nil && len(b) > maxCNIConf {
		err = fmt.Errorf("more than %d bytes", maxCNIConf)
	}
	return b, err
}

// noPodNetwork logs reason once, and again only when it changes.
func (n *Network) noPodNetwork(reason string) {
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
func (n *Network) attach(ctx context.Context, dir string, pod *podspec.Pod) (podspec.SandboxStatus, error) {
	ports := portMappings(pod.PortMappings)
	list, source, reason, err := n.conf(len(ports) > 0)
	if err != nil {
		return podspec.SandboxStatus{}, err
	}
	if list == nil {
		n.noPodNetwork(reason)
		return podspec.SandboxStatus{Message: reason}, nil
	}
	rec := netRecord{
		ID: cniContainerID(pod.UID), Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		Source: source, Conf: list.Bytes, Ports: ports,
	}
	if source == "default" {
		rec.Masquerade = &masqRule{Bridge: n.cfg.Bridge, Subnet: n.cfg.Subnet.Masked().String()}
	}
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	if err := n.record(ctx, dir, &rec); err != nil {
		return podspec.SandboxStatus{}, err
	}
	var res cnitypes.Result
	err = n.runPlugins(ctx, list, func() (err error) {
		res, err = n.cni.AddNetworkList(ctx, list, rec.runtimeConf(filepath.Join(dir, nsNet)))
		return err
	})
	if err != nil {
		return podspec.SandboxStatus{}, fmt.Errorf("add pod to network %s (%s): %w", list.Name, source, err)
	}
	ips, err := resultIPs(res)
	if err != nil {
		return podspec.SandboxStatus{}, fmt.Errorf("add pod to network %s (%s): %w", list.Name, source, err)
	}
	return podspec.SandboxStatus{IPs: ips, Network: list.Name, Source: source, Plugins: pluginTypes(list)}, nil
}

// pluginTypes are the types of list's plugins, in order.
func pluginTypes(list *libcni.NetworkConfigList) []string {
	types := make([]string, 0, len(list.Plugins))
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	return types
}

// chosen is the network a pod made now would get, as attach chooses it, or
// why it would get none (a configuration that does not load included).
func (n *Network) chosen() podspec.NetworkConf {
	list, source, reason, err := n.conf(false)
	switch {
	case err != nil:
		return podspec.NetworkConf{Why: err.Error()}
	case list == nil:
		return podspec.NetworkConf{Why: reason}
	}
	return podspec.NetworkConf{Network: list.Name, Source: source, Plugins: pluginTypes(list)}
}

// record checks rec's hostPorts against every other sandbox's, writes rec
// into dir, and adds the masquerade rule it needs unless this daemon did
// already (a later pod of the range runs no iptables command).
func (n *Network) record(ctx context.Context, dir string, rec *netRecord) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	// Within the pod too, by the same rule: validation compares a hostIP as
	// written, so "" and "0.0.0.0" (both every address) pass it, and
	// portmap would let the first mapping win without a word.
	for i, w := range rec.Ports {
		if t, ok := portConflict([]portMapping{w}, rec.Ports[:i]); ok {
			return fmt.Errorf("hostPort %d/%s: published twice by the pod (hostIP %q and %q)", t.HostPort, strings.ToUpper(t.Protocol), t.HostIP, w.HostIP)
		}
	}
	for _, own := range n.cfg.OwnPorts {
		taken := []portMapping{{HostPort: own.Port, Protocol: "tcp", HostIP: own.Address}}
		if _, ok := portConflict(rec.Ports, taken); ok {
			return fmt.Errorf("hostPort %d/TCP: staticpodd's own %s listens there", own.Port, own.Name)
		}
	}
	if len(rec.Ports) > 0 {
		for o, err := range n.otherRecords(dir) {
			if err != nil {
				continue // unreadable: it holds no port
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
	// The record before the rule: a daemon killed in between leaves a
	// record whose DEL deletes the rule, not a rule nothing names.
	path := filepath.Join(dir, netFile)
	if err := writeJSON(path, rec); err != nil {
		return err
	}
	// Known added, not known from the other records: an earlier daemon
	// may have left one whose rule it never added.
	if m := rec.Masquerade; m != nil && !n.masq[*m] {
		err := n.exclusive(ctx, func() error { return m.ensure(ctx) })
		if err == nil {
			n.masq[*m] = true
		}
		if errors.Is(err, errNoIptables) {
			// The pod is still reachable from the host; it cannot reach
			// beyond it.
			n.noIptables.Do(func() {
				n.log.Warn("pods on the default network reach no address beyond the host: no masquerade", "err", err)
			})
		} else if err != nil {
			// Nothing was added: no DEL is owed, and the sandbox's removal
			// does not wait for the lock (perhaps held for ever) again.
			err = fmt.Errorf("masquerade for pod network %s: %w", m.Subnet, err)
			if rerr := os.Remove(path); rerr != nil {
				err = errors.Join(err, rerr)
			}
			return err
		}
	}
	return nil
}

// forget removes the record of the attachment in dir, after its DEL, and
// deletes its masquerade rule m (if any) unless another sandbox's
// attachment still needs it. The record goes last, so that a failure is
// tried again with the next removal (DEL again, which does nothing the
// second time). All under mu, as record: a pod being added meanwhile is
// either seen here or adds the rule again after, and of two last pods
// going at once, the second sees the first's record gone.
func (n *Network) forget(ctx context.Context, dir string, m *masqRule) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m != nil {
		if err := n.unmasquerade(ctx, dir, m); err != nil {
			return fmt.Errorf("remove masquerade rule of pod network %s: %w", m.Subnet, err)
		}
	}
	return os.Remove(filepath.Join(dir, netFile))
}

// otherRecords yields the attachment recorded by every sandbox but the one
// in dir, or the error reading it; records removed meanwhile are skipped.
// Records are written and removed under mu: a reader under mu sees each
// whole or not at all.
func (n *Network) otherRecords(dir string) iter.Seq2[*netRecord, error] {
	return func(yield func(*netRecord, error) bool) {
		paths, _ := filepath.Glob(filepath.Join(n.runDir, Dir, "*", netFile))
		for _, p := range paths {
			if filepath.Dir(p) == dir {
				continue
			}
			var o netRecord
			err := readJSON(p, &o)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if !yield(&o, err) {
				return
			}
		}
	}
}

// unmasquerade deletes m unless the attachment of another sandbox than
// the one in dir still needs it. Under mu.
func (n *Network) unmasquerade(ctx context.Context, dir string, m *masqRule) error {
	for o, err := range n.otherRecords(dir) {
		if err != nil {
			return nil // unreadable: keep the rule, the next DEL looks again
		}
		if o.Masquerade != nil && *o.Masquerade == *m {
			return nil
		}
	}
	err := n.exclusive(ctx, func() error { return m.remove(ctx) })
	if err == nil || errors.Is(err, errNoIptables) { // no iptables: it was never added
		delete(n.masq, *m)
		return nil
	}
	return err
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

// readAttachment reads the attachment recorded in dir and its
// configuration; a nil record if none was.
func readAttachment(dir string) (*netRecord, *libcni.NetworkConfigList, error) {
	var rec netRecord
	ok, err := readOptionalJSON(filepath.Join(dir, netFile), &rec)
	if err != nil || !ok {
		return nil, nil, err
	}
	list, err := libcni.NetworkConfFromBytes(rec.Conf)
	if err != nil {
		return nil, nil, fmt.Errorf("recorded network configuration: %w", err)
	}
	return &rec, list, nil
}

// detach runs DEL for the sandbox in dir, if an attachment was recorded.
// The namespace is given when it is still there; a plugin cleans up its
// host side without it.
func (n *Network) detach(ctx context.Context, dir string) error {
	rec, list, err := readAttachment(dir)
	if err != nil || rec == nil {
		return err
	}
	netns := filepath.Join(dir, nsNet)
	if !isNsfs(netns) {
		netns = ""
	}
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	if err := n.runPlugins(ctx, list, func() error { return n.cni.DelNetworkList(ctx, list, rec.runtimeConf(netns)) }); err != nil {
		return fmt.Errorf("remove pod from network %s (%s): %w", list.Name, rec.Source, err)
	}
	return n.forget(ctx, dir, rec.Masquerade)
}

// check runs CHECK for the sandbox in dir, if an attachment was recorded
// and its configuration allows it.
func (n *Network) check(ctx context.Context, dir string) error {
	rec, list, err := readAttachment(dir)
	if err != nil || rec == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	err = n.runPlugins(ctx, list, func() error { return n.cni.CheckNetworkList(ctx, list, rec.runtimeConf(filepath.Join(dir, nsNet))) })
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check pod network %s (%s): %w", list.Name, rec.Source, err)
	}
	// The rule is put back if something flushed the nat table meanwhile.
	if m := rec.Masquerade; m != nil {
		n.mu.Lock()
		defer n.mu.Unlock()
		err := n.exclusive(ctx, func() error { return m.ensure(ctx) })
		if err == nil {
			n.masq[*m] = true
		}
		if err != nil && !errors.Is(err, errNoIptables) {
			return fmt.Errorf("masquerade for pod network %s: %w", m.Subnet, err)
		}
	}
	return nil
}

// isNsfs reports whether path is a namespace (a bind mount of one).
func isNsfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}
