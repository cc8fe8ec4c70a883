//go:build tools

// Package build names the upstream command this module builds, so that go mod
// tidy keeps its module.
package build

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
