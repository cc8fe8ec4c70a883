# staticpodd: build, demo, test, bench. Everything runs as root on Linux.
GO        ?= go
OUT       := _output
BIN       := bin/staticpodd
IMAGE_TAR := $(OUT)/images/busybox.tar
# seccomp: libcontainer loads seccomp filters through libseccomp (libseccomp-dev,
# linked statically); without the tag a container with a profile fails to start.
GOTAGS    := seccomp
# testhooks: the monitor's pause points (oci/monitor/pause_testhooks.go), which
# the oci tests stop a monitor at; never in a build that ships.
GOTAGS_TEST := $(GOTAGS) testhooks
# grpcnotrace: gRPC without golang.org/x/net/trace (request tracing, which the
# CRI server never turns on), whose html/template would make the linker keep
# every exported method of every type: 15 MB (docs/benchmarks.md, "Binary size").
GOTAGS_BUILD  := netgo osusergo grpcnotrace $(GOTAGS)
GOFLAGS_BUILD := -trimpath -tags "$(GOTAGS_BUILD)"
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -extldflags -static -X main.version=$(VERSION)

DEMO_ROOT := $(CURDIR)/$(OUT)/demo/root
DEMO_RUN  := /run/staticpodd-demo
# The built-in default network's bridge (--pod-network-bridge's default).
DEMO_BRIDGE := staticpodd0

.PHONY: all build images demo demo-clean demo-clean-bridge test test-chaos unit e2e bench bench-nodeapi bench-pull bench-policy bench-relist bench-outage bench-eviction bench-images fuzz vet clean \
	deb rpm packages test-packages appliance test-systemd test-systemd-kubeadm test-guides appliance-backports test-systemd-backports bench-systemd controlplane test-controlplane bench-controlplane test-conformance test-kubeadm test-cri test-node-e2e test-node-e2e-wide bench-size bench-idle bench-apireqs bench-probes

all: build

build: $(BIN)

SOURCES := $(shell find cmd daemon agent oci sysd third_party \( -name '*.go' -not -name '*_test.go' \) -o -name '*.[ch]') go.mod go.sum

# The program a container's monitor and init run as (oci/monitor/exe), built
# first and embedded in the daemon (the embedmonitor tag): one binary to
# install, and each container start re-executes 7 MB instead of the whole.
MONITOR_BIN := oci/monitor/exe/staticpodd-monitor

$(MONITOR_BIN): $(SOURCES)
	CGO_ENABLED=1 $(GO) build $(GOFLAGS_BUILD) -ldflags '-s -w -extldflags -static' -o $@ ./oci/monitor/exe

$(BIN): $(SOURCES) $(MONITOR_BIN)
	CGO_ENABLED=1 $(GO) build -trimpath -tags "$(GOTAGS_BUILD) embedmonitor" -ldflags '$(LDFLAGS)' -o $@ ./cmd/staticpodd

# The image tests and the demo run, built from Debian's busybox-static.
images: $(IMAGE_TAR)

$(IMAGE_TAR): $(shell find rootfs -name '*.go') /bin/busybox
	@mkdir -p $(dir $@)
	$(GO) run ./rootfs/mkimage -busybox /bin/busybox -ref busybox:latest -o $@

/bin/busybox:
	@echo "busybox-static is missing: apt-get install -y busybox-static" >&2; exit 1

# Runs staticpodd in the foreground on examples/. Stop it with Ctrl-C; pods keep
# running (they outlive the daemon); 'make demo-clean' removes them and all state.
demo: build images
	@mkdir -p $(DEMO_ROOT)
	$(BIN) images import --root-dir $(DEMO_ROOT) $(IMAGE_TAR)
	@echo
	@echo "  staticpodd is starting on examples/manifests. In another shell:"
	@echo "    curl http://127.0.0.1:8080/            # the web pod (busybox httpd)"
	@echo "    curl http://127.0.0.1:8081/            # the two-container clock pod"
	@echo "    curl -s http://127.0.0.1:10255/pods    # the read-only port, a v1 PodList"
	@echo "    export STATICPODD_RUN_DIR=$(DEMO_RUN)"
	@echo "    $(BIN) ps                      # pods and containers"
	@echo "    $(BIN) events -w               # what happens to them, as it happens"
	@echo "  Stop: Ctrl-C (pods keep running).  Clean up everything: make demo-clean"
	@echo
	$(BIN) run --config examples/config.yaml --root-dir $(DEMO_ROOT) --run-dir $(DEMO_RUN) \
		--hostname-override demo

# Runs the daemon once more on an empty manifest directory: it adopts the demo's
# pods, stops and removes them all; then it is stopped and its state removed.
# While the demo's daemon still runs, the cleanup daemon cannot take the run dir's
# lock and exits at once: say so, with the pid the lock file holds, and stop.
demo-clean: build
	@mkdir -p $(OUT)/demo/empty
	@$(BIN) run --config examples/config.yaml --pod-manifest-path $(OUT)/demo/empty \
		--root-dir $(DEMO_ROOT) --run-dir $(DEMO_RUN) --hostname-override demo & pid=$$!; \
	for i in $$(seq 120); do \
		sleep 1; \
		if ! kill -0 $$pid 2>/dev/null; then \
			wait $$pid; \
			other=$$(cat $(DEMO_RUN)/staticpodd.lock 2>/dev/null); \
			if [ -n "$$other" ] && kill -0 $$other 2>/dev/null; then \
				echo "make demo-clean: the demo daemon still runs (pid $$other): stop it first (Ctrl-C where 'make demo' runs, or kill $$other), then run 'make demo-clean' again; its pods keep running meanwhile" >&2; \
			else \
				echo "make demo-clean: the cleanup daemon exited early (see above); nothing was removed" >&2; \
			fi; \
			exit 1; \
		fi; \
		[ -z "$$(ls -A $(DEMO_RUN)/pods 2>/dev/null)" ] && break; \
	done; \
	kill $$pid; wait $$pid
	rm -rf $(OUT)/demo $(DEMO_RUN)
	-rmdir /sys/fs/cgroup/*/staticpodd-demo 2>/dev/null
	@$(MAKE) --no-print-directory demo-clean-bridge

# The default network's bridge, which the last pod's removal leaves (as a CNI
# bridge plugin's DEL does); kept while another daemon's pod is on it.
demo-clean-bridge:
	@if [ -d /sys/class/net/$(DEMO_BRIDGE) ]; then \
		if [ -n "$$(ls /sys/class/net/$(DEMO_BRIDGE)/brif 2>/dev/null)" ]; then \
			echo "make demo-clean: bridge $(DEMO_BRIDGE) kept: pods of another staticpodd are on it" >&2; \
		else ip link delete $(DEMO_BRIDGE) && echo "make demo-clean: bridge $(DEMO_BRIDGE) removed"; fi; \
	fi

# The whole suite: unit tests (the copyright generator's, a module of its own,
# first), then root tests with real containers and the end-to-end tests of the
# built binary. The chaos soak has its own target.
test: build images vet
	$(GO) -C packaging/copyright test -count=1 ./...
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) \
		$(GO) test -tags "$(GOTAGS_TEST)" -count=1 -timeout 15m -parallel 4 $$($(GO) list ./... | grep -v /tests/chaos$$)

# The chaos soak (tests/chaos): mixed pods under manifest churn while the
# daemon, its monitors, its disk and its URL source are killed, stopped,
# filled and cut off, and pods are rolled back, started after others and
# restarted. The default is CI's short run (a few minutes); the long
# soak is CHAOS_CYCLES=100 CHAOS_PODS=30. When the control plane's binaries are
# built (make controlplane), the daemon keeps mirror pods on their etcd and
# kube-apiserver, which the soak kills and restarts; CHAOS_APISERVER=1 fails
# without them, CHAOS_APISERVER=0 runs without. CHAOS_SEED replays a run (each run
# prints its seed first, and every failure names it and the cycle).
CHAOS_CYCLES ?= 15
CHAOS_PODS   ?= 10
CHAOS_SEED   ?=
CHAOS_APISERVER ?=
test-chaos: build images
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) \
		CHAOS_CYCLES=$(CHAOS_CYCLES) CHAOS_PODS=$(CHAOS_PODS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_APISERVER=$(CHAOS_APISERVER) \
		$(GO) test -count=1 -timeout 60m -v ./tests/chaos

# vet also builds the daemon without cgo and for another OS, where containers
# cannot run but the rest (validate, config, the CLI) must still build.
vet:
	$(GO) vet -tags "$(GOTAGS)" ./...
	$(GO) vet -tags "$(GOTAGS_TEST)" ./oci/...
	$(GO) -C packaging/copyright vet ./...
	CGO_ENABLED=0 $(GO) build ./cmd/... ./agent/... ./oci/... ./sysd/...
	GOOS=darwin $(GO) build ./cmd/... ./agent/... ./oci/... ./sysd/...

# BENCH_PODS: the pod counts of the scale benchmark (burst, memory, idle CPU,
# adoption after kill -9, teardown), each beside the same containers under
# the runc CLI.
BENCH_PODS ?= 10,100
bench: build images bench-nodeapi bench-pull bench-policy bench-size
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) \
		$(GO) run ./tests/bench -runs 30 -pods $(BENCH_PODS)

# What bin/staticpodd is made of: its symbols' bytes by Go module, the
# embedded monitor, its sections. The same build linked without -s (the
# symbol table only: same code, same layout) is what is attributed; its
# linker's dependency dump (-dumpdep, to stderr) says whether anything made
# it keep every method. Removed first: go build links nothing, and dumps
# nothing, for an output that is up to date.
SIZE_SYMS := $(OUT)/size/staticpodd.syms
SIZE_DEPS := $(OUT)/size/staticpodd.dumpdep
bench-size: build
	@mkdir -p $(dir $(SIZE_SYMS))
	rm -f $(SIZE_SYMS)
	CGO_ENABLED=1 $(GO) build -trimpath -tags "$(GOTAGS_BUILD) embedmonitor" -ldflags '$(filter-out -s,$(LDFLAGS)) -dumpdep' -o $(SIZE_SYMS) ./cmd/staticpodd 2>$(SIZE_DEPS) || \
		{ grep -v -- ' -> ' $(SIZE_DEPS) >&2; exit 1; }
	$(GO) run ./tests/bench/size -bin $(BIN) -syms $(SIZE_SYMS) -dumpdep $(SIZE_DEPS)

# The node API's bulk endpoints (/pods, /stats/summary, /metrics*) with 10 and
# 100 pods, over TLS with a client certificate: latency, allocations, size.
bench-nodeapi:
	$(GO) test -run '^$$' -bench NodeAPI -benchmem -count 3 ./agent/server

# A ~100 MiB 4-layer image pulled from a registry on 127.0.0.1 into an empty
# store, imported from a docker-archive, copied by skopeo, pulled and loaded
# by podman; the store's unpack against tar -x of the same layers.
bench-pull:
	$(GO) test -run '^$$' -bench '^BenchmarkPull$$' -benchtime 3x -count 1 ./oci/image

# What the image policy's decision costs an arrival: none, accept-anything,
# a cosign signature and a sigstore bundle verified, four refused.
bench-policy:
	$(GO) test -run '^$$' -bench '^BenchmarkEvaluate$$' -benchmem -count 3 ./oci/image/policy

# Only the idle daemon's CPU with 100 manifests, relisting every 20s and never.
bench-relist: build
	STATICPODD_BIN=$(CURDIR)/$(BIN) $(GO) run ./tests/bench -relist-only -relist-manifests 100 -relist-window 60s

# The mirror client, then the daemon, facing an API server that refuses every
# connection for ten minutes each: goroutines, heap, RSS and threads must not grow.
bench-outage: build images
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) \
		$(GO) run ./tests/bench -only outage -outage-window 10m

# The Kubernetes v1.37.2 control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubeadm, kubectl), built statically
# from tests/controlplane/build, once, into
# $${XDG_CACHE_HOME:-$$HOME/.cache}/staticpodd/controlplane/v1.37.2/bin: about
# 15 minutes on 2 cores the first time, nothing after.
CONTROLPLANE_BUILD := tests/controlplane/build.sh
controlplane:
	bash $(CONTROLPLANE_BUILD)

# etcd's and kube-apiserver's images under the names kubeadm's manifests give
# them (busybox and the binary; tests/controlplane/cluster makes the same), for
# test-systemd, whose guest has no network.
CONTROLPLANE_IMAGES := $(OUT)/images/etcd.tar $(OUT)/images/kube-apiserver.tar
$(OUT)/images/etcd.tar: CONTROLPLANE_REF = registry.k8s.io/etcd:3.7.0-0
$(OUT)/images/kube-apiserver.tar: CONTROLPLANE_REF = registry.k8s.io/kube-apiserver:v1.37.2
$(CONTROLPLANE_IMAGES): $(shell find rootfs -name '*.go') /bin/busybox $(CONTROLPLANE_BUILD)
	@mkdir -p $(dir $@)
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && name=$(basename $(notdir $@)) && \
	$(GO) run ./rootfs/mkimage -busybox /bin/busybox -ref $(CONTROLPLANE_REF) \
		-add $$cpbin/$$name:/usr/local/bin/$$name -cmd $$name -o $@

# The tests that need those binaries (build tag controlplane; not part of make
# test, which must not wait for the build): kubeadm's control plane
# bootstrapped under staticpodd, air-gapped, with its mirror pods on the API
# server it runs (tests/controlplane), and the mirror client against a real
# kube-apiserver (tests/mirror).
CONTROLPLANE_TESTS := ./tests/controlplane/... ./tests/mirror/...
test-controlplane: build images
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && \
	$(GO) vet -tags controlplane $(CONTROLPLANE_TESTS) && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) STATICPODD_CONTROLPLANE_BIN=$$cpbin \
		$(GO) test -tags controlplane -count=1 -timeout 30m -v $(CONTROLPLANE_TESTS)

# The real kubeadm v1.37.2 (from the control-plane build's cache) drives
# staticpodd through init, the node and its mirror pods, upgrade apply and
# reset, each "machine" a network namespace and a private mount namespace of
# the test's own (tests/kubeadm, build tag kubeadm), with crictl (the CRI
# test's build) for troubleshooting; and, for the figures beside it, kubeadm
# init with the real kubelet (the conformance test's build) on Debian's
# containerd in the same kind of machine. About 3 minutes.
test-kubeadm: build images
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && kubelet=$$(bash $(CONTROLPLANE_BUILD) kubelet) && crictl=$$(bash $(CRICTL_BUILD)) && \
	$(GO) vet -tags kubeadm ./tests/kubeadm && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) STATICPODD_CONTROLPLANE_BIN=$$cpbin \
		STATICPODD_KUBELET=$$kubelet/kubelet CRICTL=$$crictl/crictl \
		$(GO) test -tags kubeadm -count=1 -timeout 20m -v ./tests/kubeadm

# /pods of staticpodd against the real kubelet's on the same manifests
# (tests/conformance, build tag conformance): the kubelet v1.37.2, built
# once by the control-plane build script into
# $${XDG_CACHE_HOME:-$$HOME/.cache}/staticpodd/controlplane/v1.37.2/kubelet
# (a few minutes the first time), runs standalone on a containerd of its own
# (Debian's containerd package: containerd, ctr, runc); and what a pod sees
# of its ConfigMaps and Secrets, with the kubelet registered to the
# control-plane build's etcd and kube-apiserver (25 s more: 50 s in all).
test-conformance: build images
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && kubelet=$$(bash $(CONTROLPLANE_BUILD) kubelet) && \
	$(GO) vet -tags conformance ./tests/conformance && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) STATICPODD_KUBELET=$$kubelet/kubelet STATICPODD_CONTROLPLANE_BIN=$$cpbin \
		$(GO) test -tags conformance -count=1 -timeout 15m -v ./tests/conformance

# crictl against staticpodd's CRI socket (tests/crictl_test.go): crictl
# v1.37.0 is built statically from tests/crictl/build, once, into
# $${XDG_CACHE_HOME:-$$HOME/.cache}/staticpodd/crictl/v1.37.0 (a minute and a
# half the first time, nothing after); the test takes a few seconds.
CRICTL_BUILD := tests/crictl/build.sh
test-cri: build images
	crictl=$$(bash $(CRICTL_BUILD)) && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) CRICTL=$$crictl/crictl \
		$(GO) test -tags "$(GOTAGS_TEST)" -count=1 -timeout 5m -v -run 'TestCrictl' ./tests

# The kubelet's own node e2e suites, unchanged, against staticpodd
# (tests/nodee2e, build tag nodee2e): every It of mirror_pod_test.go,
# mirror_pod_grace_period_test.go and static_pod_test.go with staticpodd
# registered on the control-plane test's API server, and of standalone_test.go
# with staticpodd given no kubeconfig. e2e_node.test v1.37.2 is built once by
# the control-plane build script into
# $${XDG_CACHE_HOME:-$$HOME/.cache}/staticpodd/controlplane/v1.37.2/e2e_node.
# NODE_E2E_SKIP is a ginkgo skip regexp: the Its that cannot apply
# (docs/kubelet-differences.md says why), and with NODE_E2E_SKIP_KNOWN=1 (CI)
# also those that fail today, each an open bug listed there, to be fixed and
# taken off this list. The JUnit reports go to _output/node-e2e.
NODE_E2E_NOT_APPLICABLE := container is removed and kubelet restarts|container runtime is temporarily down|volume failing to unmount
NODE_E2E_KNOWN_FAILURES :=
NODE_E2E_SKIP ?= $(NODE_E2E_NOT_APPLICABLE)$(if $(NODE_E2E_SKIP_KNOWN),$(if $(NODE_E2E_KNOWN_FAILURES),|$(NODE_E2E_KNOWN_FAILURES)))
# NODE_E2E_WIDE=1 also runs the widened set (test-node-e2e-wide); NODE_E2E_RUN
# is go test's -run, to run one of the runs alone.
NODE_E2E_WIDE ?=
NODE_E2E_RUN ?=
test-node-e2e: build images
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && e2e=$$(bash $(CONTROLPLANE_BUILD) e2e_node) && \
	$(GO) vet -tags nodee2e ./tests/nodee2e && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) STATICPODD_CONTROLPLANE_BIN=$$cpbin \
	STATICPODD_E2E_NODE=$$e2e/e2e_node.test NODE_E2E_REPORT_DIR=$(CURDIR)/_output/node-e2e NODE_E2E_SKIP='$(NODE_E2E_SKIP)' NODE_E2E_WIDE=$(NODE_E2E_WIDE) \
		$(GO) test -tags nodee2e -count=1 -timeout 60m -v $(NODE_E2E_RUN) ./tests/nodee2e

# The widened set (docs/kubelet-differences.md): the suite's other Its that a
# node agent running static pods only can be judged by (the Node's lease and
# status, /configz, the serving certificate and client CA reloaded from disk,
# a static pod whose manifest is removed while the agent is down), on a node
# of its own with the same control plane: about 3 minutes, 2 of them the
# suite's. NODE_E2E_WIDE=1 on test-node-e2e (CI) runs it between the mirror
# and the standalone runs.
test-node-e2e-wide:
	$(MAKE) test-node-e2e NODE_E2E_WIDE=1 NODE_E2E_RUN='-run TestNodeE2E/wide'

# From staticpodd's start to each control-plane process, /readyz, the mirror
# pods and all Ready, and staticpodd's memory then and 60 s later, at rest:
# median of 3 cold runs.
bench-controlplane: build
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_CONTROLPLANE_BIN=$$cpbin $(GO) run ./tests/controlplane/bench -runs 3

# API server requests per minute of a node at steady state, staticpodd
# against the kubelet v1.37.2 on Debian's containerd: kubeadm init on a
# machine of each at once, counted from each API server's audit log
# (tests/kubeadm/apireqs_test.go). APIREQS_RUNS runs of APIREQS_WINDOW each,
# about 2 minutes more per run for init, the settling and the reset.
APIREQS_RUNS ?= 2
APIREQS_WINDOW ?= 3m
bench-apireqs: build images
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && kubelet=$$(bash $(CONTROLPLANE_BUILD) kubelet) && crictl=$$(bash $(CRICTL_BUILD)) && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) STATICPODD_CONTROLPLANE_BIN=$$cpbin \
		STATICPODD_KUBELET=$$kubelet/kubelet CRICTL=$$crictl/crictl \
		STATICPODD_APIREQS=1 STATICPODD_APIREQS_RUNS=$(APIREQS_RUNS) STATICPODD_APIREQS_WINDOW=$(APIREQS_WINDOW) \
		$(GO) test -tags kubeadm -count=1 -timeout 60m -v -run '^TestAPIRequests$$' ./tests/kubeadm

# Only the probes' CPU against the kubelet v1.37.2 on Debian's containerd
# (100 hostNetwork pods, one exec, then httpGet, readiness probe each every
# second), and staticpodd exec against runc exec; in a network namespace of
# its own, as the pods' httpd listen on 127.0.0.1:20000 and up. PROBES_OLD=BIN adds
# an older staticpodd as a third side of the same rounds.
bench-probes: build images
	kdir=$$(bash $(CONTROLPLANE_BUILD) kubelet) && \
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) STATICPODD_KUBELET=$$kdir/kubelet \
		unshare -n sh -c 'ip link set lo up && exec $(GO) run ./tests/bench -only exec,probes-kubelet $(if $(PROBES_OLD),-probe-old $(PROBES_OLD))'

# Only the image export + import round trip, against skopeo copy.
bench-images: build images
	STATICPODD_BIN=$(CURDIR)/$(BIN) $(GO) run ./tests/bench -only images

# Only the idle daemon with 100 pods: its and its monitors' wake-ups per minute
# and CPU, beside IDLE_OLD (a binary built from main) when given, the two
# alternating; each wake-up named by source from a benchtrace build (a runtime
# trace of the window: daemon/benchtrace.go), of this tree and of the builds
# IDLE_TRACED names (label=binary,...).
bench-idle: build images
	CGO_ENABLED=1 $(GO) build -trimpath -tags "$(GOTAGS_BUILD) embedmonitor benchtrace" -ldflags '$(LDFLAGS)' -o $(BIN).benchtrace ./cmd/staticpodd
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) \
		$(GO) run ./tests/bench -only idle -idle-old '$(IDLE_OLD)' -idle-traced 'new=$(CURDIR)/$(BIN).benchtrace,$(IDLE_TRACED)'

# Only eviction: detection latency of a 100 MB/s leak with the memory
# notifier and with polling alone, and the eviction manager's idle CPU.
bench-eviction: build images
	STATICPODD_BIN=$(CURDIR)/$(BIN) STATICPODD_IMAGE=$(CURDIR)/$(IMAGE_TAR) \
		$(GO) run ./tests/bench -only eviction

# Fuzzes the manifest parser and validator (FuzzParseFile) and the URL body
# decoder (FuzzParseURL), FUZZTIME each, from the seeds in
# agent/manifest/testdata/fuzz/seeds. A failing input is written to
# agent/manifest/testdata/fuzz/<target>/ and replayed by every go test after.
# Minimizing each new input is cut to FUZZMINIMIZE (go's default is a minute
# per input, which on a busy machine can take most of a short run).
FUZZTIME ?= 1m
FUZZMINIMIZE ?= 10s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseFile$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./agent/manifest
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./agent/manifest

# Packages, built by nfpm (a module of its own in packaging/nfpm, so that its
# dependencies stay out of the daemon's go.mod). PKG_VERSION must start with a
# digit for dpkg and rpm.
PKG_VERSION := 0.1.0+git$(shell git rev-parse --short HEAD 2>/dev/null || echo 0)
PKG_ARCH    := $(shell $(GO) env GOARCH)
NFPM        := $(OUT)/tools/nfpm
PKG_STAGE   := $(OUT)/pkg/stage
DEB         := $(OUT)/pkg/staticpodd_$(PKG_VERSION)_$(PKG_ARCH).deb
# staticpodd-kubeadm, the companion package: kubelet.service running staticpodd as
# kubeadm's kubelet (packaging/kubeadm). KUBELET_VERSION, which it provides, is the
# built binary's answer to `kubelet --version`.
KUBEADM_DEB := $(OUT)/pkg/staticpodd-kubeadm_$(PKG_VERSION)_$(PKG_ARCH).deb
KUBELET_VERSION = $$($(BIN) kubelet --version | sed 's/^Kubernetes v//')

$(NFPM): packaging/nfpm/go.mod packaging/nfpm/go.sum
	cd packaging/nfpm && $(GO) build -o $(CURDIR)/$@ github.com/goreleaser/nfpm/v2/cmd/nfpm

$(PKG_STAGE)/staticpodd.8.gz: $(BIN) packaging/manpage.sh
	@mkdir -p $(dir $@)
	packaging/manpage.sh $(BIN) $(PKG_VERSION) | gzip -9n > $@

# The copyright file (DEP-5) of the packages and their SPDX licence
# expression, from the modules and C libraries linked into the binary
# (packaging/copyright, a module of its own like packaging/nfpm). It fails
# naming any linked module whose licence it cannot identify.
# The .deb's copyright refers to /usr/share/common-licenses as Debian policy
# wants; the rpm's (copyright.full) holds every licence's full text.
$(PKG_STAGE)/copyright $(PKG_STAGE)/copyright.full $(PKG_STAGE)/license &: $(BIN) LICENSE NOTICE $(wildcard packaging/copyright/*)
	@mkdir -p $(PKG_STAGE)
	$(GO) -C packaging/copyright run . -root $(CURDIR) -o $(CURDIR)/$(PKG_STAGE)/copyright \
		-full $(CURDIR)/$(PKG_STAGE)/copyright.full -spdx $(CURDIR)/$(PKG_STAGE)/license

# nfpm expands no variable in license:, so the config nfpm reads is
# packaging/nfpm.yaml with the expression of everything linked put there.
NFPM_CONFIG := $(OUT)/pkg/nfpm.yaml
$(NFPM_CONFIG): packaging/nfpm.yaml $(PKG_STAGE)/license
	sed "s|^license: .*|license: $$(cat $(PKG_STAGE)/license)|" packaging/nfpm.yaml > $@

# The shell completion scripts (cobra's), which complete pod names from the
# running daemon and image references from the store.
COMPLETIONS := $(PKG_STAGE)/completion.bash $(PKG_STAGE)/completion.zsh $(PKG_STAGE)/completion.fish
$(PKG_STAGE)/completion.%: $(BIN)
	@mkdir -p $(dir $@)
	$(BIN) completion $* > $@

# pkg-stage: what nfpm.yaml takes from the build.
pkg-stage: $(BIN) $(PKG_STAGE)/staticpodd.8.gz $(PKG_STAGE)/copyright $(COMPLETIONS) $(NFPM_CONFIG)
	@mkdir -p $(PKG_STAGE)
	cp $(BIN) $(PKG_STAGE)/staticpodd

# staticpodd's .deb: nfpm lays it out (uncompressed), then dpkg-deb builds it
# again from the same tree, compressed as xz -9e: 11.8 MB where nfpm's own
# pure-Go xz made 16.6 of the same files (docs/benchmarks.md, "Binary size").
# xz -9's 64 MiB window spans the whole binary, the embedded monitor's copy of
# libcontainer, the standard library and libc included; unpacking it takes 65
# MiB of memory (xz -6: 9). $(call nfpm_deb,VERSION,TARGET)
define nfpm_deb
	rm -rf $(2).tmp && mkdir -p $(2).tmp
	VERSION=$(1) ARCH=$(PKG_ARCH) \
		$(NFPM) pkg --config $(NFPM_CONFIG) --packager deb --target $(2).tmp/nfpm.deb
	dpkg-deb --raw-extract $(2).tmp/nfpm.deb $(2).tmp/root
	dpkg-deb --root-owner-group -Zxz -z9 -Sextreme --build $(2).tmp/root $(2)
	rm -rf $(2).tmp
endef

deb: $(NFPM) pkg-stage
	$(call nfpm_deb,$(PKG_VERSION),$(DEB))
	VERSION=$(PKG_VERSION) ARCH=$(PKG_ARCH) KUBELET_VERSION=$(KUBELET_VERSION) \
		$(NFPM) pkg --config packaging/kubeadm/nfpm.yaml --packager deb --target $(KUBEADM_DEB)

rpm: $(NFPM) pkg-stage
	VERSION=$(PKG_VERSION) ARCH=$(PKG_ARCH) \
		$(NFPM) pkg --config $(NFPM_CONFIG) --packager rpm --target $(OUT)/pkg/
	VERSION=$(PKG_VERSION) ARCH=$(PKG_ARCH) KUBELET_VERSION=$(KUBELET_VERSION) \
		$(NFPM) pkg --config packaging/kubeadm/nfpm.yaml --packager rpm --target $(OUT)/pkg/

packages: deb rpm

# Both packages of each kind, built, with what they must hold, lintian's verdict
# on the .debs (tests/packaging_test.go), and their size (tests/size_test.go).
test-packages: deb rpm
	STATICPODD_PKG_DIR=$(CURDIR)/$(OUT)/pkg $(GO) test -count=1 -v -run 'TestPackagesBuilt|TestPackageSize|TestKubeletUnitIsStaticpoddsService|TestKubeadmDropInIsKubeadms' ./tests/

# The appliance: Debian bookworm with systemd, the .deb installed and enabled, the
# web example's manifest and its image in the import folder. Its debootstrap base
# is cached in $${XDG_CACHE_HOME:-$$HOME/.cache}/staticpodd/appliance. Boot it with
# rootfs/appliance/boot.sh (see rootfs/README.md).
APPLIANCE := $(OUT)/appliance/root.img
appliance: deb images
	rootfs/appliance/build.sh $(DEB) $(IMAGE_TAR) examples/manifests/web.yaml $(APPLIANCE)

# The test under a real booted systemd (PID 1, cgroup v2): boots the appliance
# under qemu and runs tests/systemd/check.sh inside; a second .deb of a later
# version tests the upgrade. Each power-off or reboot must end within SHUTDOWN_MAX
# seconds (boot 1 reboots with web's httpd, which ignores SIGTERM, running), not
# after systemd-shutdown's 90. Start order (tests/systemd/order.sh): boot 1's reboot
# stops two ordered pods' scopes dependent first; boot 2 starts control-plane
# stand-ins with and without start-after and counts the API server's restarts.
# Boot 2 then runs kubeadm's etcd and kube-apiserver with their private keys
# from Secrets whose values are LoadCredentialEncrypted= credentials, sealed in
# the guest, no key ever on its disk (tests/systemd/credentials.sh): in
# emulation on a busy machine, about 5 minutes more, hence the two boots'
# BOOT_TIMEOUT of 30 minutes (boot.sh's default is 15).
# Needs debootstrap, qemu-system-x86, linux-image-amd64, and kubeadm, kubectl,
# etcd and kube-apiserver (make controlplane).
UPGRADE_DEB := $(OUT)/pkg/upgrade/staticpodd_$(PKG_VERSION).1_$(PKG_ARCH).deb
test-systemd: appliance $(CONTROLPLANE_IMAGES)
	@mkdir -p $(dir $(UPGRADE_DEB))
	$(call nfpm_deb,$(PKG_VERSION).1,$(UPGRADE_DEB))
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && \
	BOOT_TIMEOUT=$${BOOT_TIMEOUT:-1800} SHUTDOWN_MAX=$${SHUTDOWN_MAX:-45} rootfs/appliance/boot.sh $(APPLIANCE) tests/systemd/check.sh $(OUT)/appliance/share \
		$(UPGRADE_DEB) $(IMAGE_TAR) tests/systemd/memhog.yaml tests/systemd/journal.sh tests/systemd/order.sh \
		tests/systemd/credentials.sh $$cpbin/kubeadm $$cpbin/kubectl $(CONTROLPLANE_IMAGES)

# staticpodd-kubeadm under a real booted systemd, in one boot of the appliance: the
# package takes the machine over from staticpodd.service without touching its pod;
# the real kubeadm's preflight reaches the CRI through staticpodd-cri.socket before the
# kubelet has its config; its kubelet-start phase (which runs `systemctl restart
# kubelet`) starts staticpodd as its kubelet; and kubeadm reset, which stops the
# kubelet first, removes the pod through the CRI (tests/systemd/check-kubeadm.sh).
# Needs kubeadm (make controlplane).
test-systemd-kubeadm: appliance
	cpbin=$$(bash $(CONTROLPLANE_BUILD)) && \
	rootfs/appliance/boot.sh $(APPLIANCE) tests/systemd/check-kubeadm.sh $(OUT)/appliance/share-kubeadm \
		$(KUBEADM_DEB) $$cpbin/kubeadm tests/systemd/kubeadm.yaml

# The guides of docs/guides that need a machine of their own, each followed from a
# clean start by tests/guides/run.sh, one boot each: install.md on the appliance's
# Debian base alone (build.sh --clean: no staticpodd), where
# tests/guides/install-check.sh runs its commands; appliance.md's commands on this
# machine (a base debootstrapped from deb.debian.org, so network access, two
# manifests, two images, build.sh --rootfs), then its image booted. Needs what
# test-systemd needs. tests/guides/guide_test.go (in make test) keeps each guide's
# commands the ones run.
test-guides: deb images
	tests/guides/run.sh $(DEB) $(IMAGE_TAR)

# The start and scale benchmarks (tests/bench -only start,scale) inside the booted
# appliance, one boot: cgroup v2 under a real systemd, the systemd cgroup driver
# on every side (cgroupDriver: systemd, runc --systemd-cgroup, the floor's
# scopes), against this host's runc CLI and the floor program (tests/bench/floor)
# put in the share for this boot only (tests/systemd/bench.sh): the appliance
# ships neither. The guest is emulated: only the ratios mean anything.
# BENCH_SYSTEMD_ARGS: the benchmark's arguments (its waits 20 times as long: the guest
# is tens of times slower than the host). Needs what test-systemd needs,
# and runc.
BENCH_SYSTEMD_ARGS ?= -only start,scale -runs 10 -pods 100 -scale-rounds 2 -scale-idle-window 10s -timeout-scale 20 -runc-loop -trace-starts
BENCH_SYSTEMD := $(OUT)/bench-systemd
bench-systemd: appliance
	@command -v runc >/dev/null || { echo "runc is missing: apt-get install -y runc" >&2; exit 1; }
	@mkdir -p $(BENCH_SYSTEMD)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BENCH_SYSTEMD)/bench ./tests/bench
	CGO_ENABLED=1 $(GO) build -trimpath -tags "netgo osusergo" -ldflags '-s -w -extldflags -static' -o $(BENCH_SYSTEMD)/floor ./tests/bench/floor
	cp $$(command -v runc) $(BENCH_SYSTEMD)/runc
	echo '$(BENCH_SYSTEMD_ARGS)' >$(BENCH_SYSTEMD)/BENCH_ARGS
	MEM=$${MEM:-4096} BOOT_TIMEOUT=$${BOOT_TIMEOUT:-3600} rootfs/appliance/boot.sh $(APPLIANCE) tests/systemd/bench.sh $(OUT)/appliance/share-bench \
		$(BENCH_SYSTEMD)/bench $(BENCH_SYSTEMD)/floor $(BENCH_SYSTEMD)/runc $(BENCH_SYSTEMD)/BENCH_ARGS $(IMAGE_TAR)

# The same appliance with systemd from bookworm-backports (254), booted once for
# what only systemd >= 253/254 has: Type=notify-reload, DelegateSubgroup= with
# the pods of cgroupDriver cgroupfs inside the unit, and beside them socket
# activation and a --ready-when start that times out (tests/systemd/check-backports.sh).
APPLIANCE_BP := $(OUT)/appliance-backports/root.img
appliance-backports: deb images
	APPLIANCE_SYSTEMD=backports rootfs/appliance/build.sh $(DEB) $(IMAGE_TAR) examples/manifests/web.yaml $(APPLIANCE_BP)

# One boot of many checks: in emulation on a busy machine it takes 15 minutes and more.
test-systemd-backports: appliance-backports
	BOOT_TIMEOUT=$${BOOT_TIMEOUT:-2400} rootfs/appliance/boot.sh $(APPLIANCE_BP) tests/systemd/check-backports.sh $(OUT)/appliance-backports/share \
		tests/systemd/memhog.yaml

clean:
	rm -rf bin $(OUT) $(MONITOR_BIN)
