package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults staticpodd chooses where the kubelet has none or a different one.
const (
	// DefaultStaticPodPath is where kubeadm puts static pods; the kubelet itself has
	// no default and runs no static pods without one.
	DefaultStaticPodPath = "/etc/kubernetes/manifests"
	DefaultRootDir       = "/var/lib/staticpodd"
	DefaultRunDir        = "/run/staticpodd"
	// DefaultRegistryConfigDir is containerd's: appliance builders reuse the
	// hosts.toml files they have.
	DefaultRegistryConfigDir = "/etc/containerd/certs.d"
	// DefaultImagePullProgressTimeout is the progress deadline of a
	// registry's response body: containerd waits 5 minutes for any byte at
	// all; an appliance at boot cannot give a dead registry that long, and
	// a working one brings far more than 1 KiB/s.
	DefaultImagePullProgressTimeout = time.Minute
	// DefaultCgroupRoot is our own subtree. The kubelet's default, "", means the
	// root of the hierarchy; staticpodd never writes into the root, so its pods
	// never sit beside the host's own services and can be found and removed as one
	// tree.
	DefaultCgroupRoot = "/staticpodd"
	// DefaultReadOnlyAddress is the read-only port's address when no
	// address is given: loopback, because the port serves every pod's spec,
	// env values included, without authentication. The kubelet's is 0.0.0.0,
	// which stays the node API's (authenticated) default.
	DefaultReadOnlyAddress = "127.0.0.1"
	// DefaultMaxContainerRestartPeriod is the kubelet's MaxContainerBackOff.
	DefaultMaxContainerRestartPeriod = 300 * time.Second
)

// defaultEvictionHard is the kubelet's eviction.DefaultEvictionHard (Linux), used
// when the file sets no evictionHard at all.
func defaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// setDefaults applies the kubelet's v1beta1 defaults
// (pkg/kubelet/apis/config/v1beta1/defaults.go, SetDefaults_KubeletConfiguration),
// values copied as they are, minus those that depend on feature gates and the
// logging configuration. They serve two ends: the effective value of the fields
// staticpodd honours, and telling whether an ignored field was set to anything but
// its default (only then it earns a warning).
func setDefaults(obj *kubeletConfiguration) {
	zero := metav1.Duration{}
	setBool := func(p **bool, v bool) {
		if *p == nil {
			*p = &v
		}
	}
	setInt32 := func(p **int32, v int32) {
		if *p == nil {
			*p = &v
		}
	}
	setDur := func(p *metav1.Duration, d time.Duration) {
		if *p == zero {
			*p = metav1.Duration{Duration: d}
		}
	}
	setString := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}

	setBool(&obj.EnableServer, true)
	setDur(&obj.SyncFrequency, time.Minute)
	setDur(&obj.FileCheckFrequency, 20*time.Second)
	setDur(&obj.HTTPCheckFrequency, 20*time.Second)
	setString(&obj.Address, "0.0.0.0")
	if obj.Port == 0 {
		obj.Port = 10250 // ports.KubeletPort
	}
	setBool(&obj.Authentication.Anonymous.Enabled, false)
	setBool(&obj.Authentication.Webhook.Enabled, true)
	setDur(&obj.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if obj.Authorization.Mode == "" {
		obj.Authorization.Mode = "Webhook"
	}
	setDur(&obj.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	setDur(&obj.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
	setInt32(&obj.RegistryPullQPS, 5)
	if obj.RegistryBurst == 0 {
		obj.RegistryBurst = 10
	}
	setInt32(&obj.EventRecordQPS, 50)
	if obj.EventBurst == 0 {
		obj.EventBurst = 100
	}
	setBool(&obj.EnableDebuggingHandlers, true)
	setInt32(&obj.HealthzPort, 10248)
	setString(&obj.HealthzBindAddress, "127.0.0.1")
	setInt32(&obj.OOMScoreAdj, -999) // qos.KubeletOOMScoreAdj
	setDur(&obj.StreamingConnectionIdleTimeout, 4*time.Hour)
	if obj.NodeStatusReportFrequency == zero {
		if obj.NodeStatusUpdateFrequency == zero {
			obj.NodeStatusReportFrequency = metav1.Duration{Duration: 5 * time.Minute}
		} else {
			obj.NodeStatusReportFrequency = obj.NodeStatusUpdateFrequency
		}
	}
	setDur(&obj.NodeStatusUpdateFrequency, 10*time.Second)
	if obj.NodeLeaseDurationSeconds == 0 {
		obj.NodeLeaseDurationSeconds = 40
	}
	setDur(&obj.ImageMinimumGCAge, 2*time.Minute)
	setInt32(&obj.ImageGCHighThresholdPercent, 85)
	setInt32(&obj.ImageGCLowThresholdPercent, 80)
	setDur(&obj.VolumeStatsAggPeriod, time.Minute)
	setBool(&obj.CgroupsPerQOS, true)
	setString(&obj.CgroupDriver, "cgroupfs")
	setString(&obj.CPUManagerPolicy, "none")
	setDur(&obj.CPUManagerReconcilePeriod, 10*time.Second)
	setString(&obj.MemoryManagerPolicy, "None")
	setString(&obj.TopologyManagerPolicy, "none")
	setString(&obj.TopologyManagerScope, "container")
	setDur(&obj.RuntimeRequestTimeout, 2*time.Minute)
	setString(&obj.HairpinMode, "promiscuous-bridge")
	if obj.MaxPods == 0 {
		obj.MaxPods = 110
	}
	if obj.PodPidsLimit == nil || *obj.PodPidsLimit < 0 {
		v := int64(-1)
		obj.PodPidsLimit = &v
	}
	if obj.ResolverConfig == nil {
		v := "/etc/resolv.conf" // kubetypes.ResolvConfDefault
		obj.ResolverConfig = &v
	}
	setBool(&obj.CPUCFSQuota, true)
	if obj.CPUCFSQuotaPeriod == nil {
		obj.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	setInt32(&obj.NodeStatusMaxImages, 50)
	if obj.MaxOpenFiles == 0 {
		obj.MaxOpenFiles = 1000000
	}
	setString(&obj.ContentType, "application/vnd.kubernetes.protobuf")
	setInt32(&obj.KubeAPIQPS, 50)
	if obj.KubeAPIBurst == 0 {
		obj.KubeAPIBurst = 100
	}
	if obj.SerializeImagePulls == nil {
		setBool(&obj.SerializeImagePulls, obj.MaxParallelImagePulls == nil || *obj.MaxParallelImagePulls < 2)
	}
	setDur(&obj.EvictionPressureTransitionPeriod, 5*time.Minute)
	setBool(&obj.MergeDefaultEvictionSettings, false)
	setBool(&obj.EnableControllerAttachDetach, true)
	setBool(&obj.MakeIPTablesUtilChains, true)
	setInt32(&obj.IPTablesMasqueradeBit, 14)
	setInt32(&obj.IPTablesDropBit, 15)
	setBool(&obj.FailSwapOn, true)
	setString(&obj.ContainerLogMaxSize, "10Mi")
	setInt32(&obj.ContainerLogMaxFiles, 5)
	setInt32(&obj.ContainerLogMaxWorkers, 1)
	if obj.ContainerLogMonitorInterval == nil {
		obj.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	setString((*string)(&obj.ConfigMapAndSecretChangeDetectionStrategy), "Watch")
	if obj.EnforceNodeAllocatable == nil {
		obj.EnforceNodeAllocatable = []string{"pods"}
	}
	setString(&obj.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")
	setBool(&obj.EnableSystemLogHandler, true)
	setBool(&obj.EnableProfilingHandler, true)
	setBool(&obj.EnableDebugFlagsHandler, true)
	setBool(&obj.SeccompDefault, false)
	setBool(&obj.FailCgroupV1, true)
	setString((*string)(&obj.MemoryReservationPolicy), "None")
	setBool(&obj.RegisterNode, true)
	setBool(&obj.LocalStorageCapacityIsolation, true)
	setString(&obj.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock")
	setString(&obj.PodLogsDir, "/var/log/pods")
	if obj.CrashLoopBackOff.MaxContainerRestartPeriod == nil {
		obj.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: DefaultMaxContainerRestartPeriod}
	}
	setString(&obj.Logging.Format, "text")
}
