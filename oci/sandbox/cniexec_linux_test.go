//go:build linux && cgo

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// loudPlugin writes 1 MiB to stderr and then, unless LOUD_OK is set, fails
// with an error whose message and details are 1 MiB each.
const loudPlugin = `#!/bin/sh
head -c 1048576 /dev/zero | tr '\0' e >&2
if [ -n "$LOUD_OK" ]; then
	printf '{"cniVersion":"1.0.0"}'
	exit 0
fi
printf '{"cniVersion":"1.0.0","code":7,"msg":"'
head -c 1048576 /dev/zero | tr '\0' m
printf '","details":"'
head -c 1048576 /dev/zero | tr '\0' d
printf '"}'
exit 1
`

// A CNI plugin's stderr and error reach the log, the pod's events and its
// status: each keeps podspec.MaxOutput of what the plugin said, and nothing
// of it goes to the daemon's stderr past its log handler.
func TestPluginOutputBounded(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "loud"), []byte(loudPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.0.0","name":"loud","plugins":[{"type":"loud"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Whatever is written to the process's stderr, from the moment the
	// network is made.
	stderrFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = stderrFile
	var logs bytes.Buffer
	n := NewNetwork(NetworkConfig{BinDirs: []string{bin}, CacheDir: t.TempDir()}, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
	os.Stderr = saved
	rt := &libcni.RuntimeConf{ContainerID: "loud", NetNS: "/proc/self/ns/net", IfName: "eth0"}

	_, err = n.cni.AddNetworkList(context.Background(), list, rt)
	var perr *cnitypes.Error
	if !errors.As(err, &perr) || perr.Code != 7 {
		t.Fatalf("err = %.200v, want the plugin's error", err)
	}
	if len(perr.Msg) > podspec.MaxOutput || len(perr.Details) > podspec.MaxOutput || !strings.HasPrefix(perr.Msg, "mmm") {
		t.Errorf("error message of %d bytes and details of %d, want the start of each, at most %d bytes",
			len(perr.Msg), len(perr.Details), podspec.MaxOutput)
	}

	t.Setenv("LOUD_OK", "1")
	logs.Reset()
	_, _ = n.cni.AddNetworkList(context.Background(), list, rt) // succeeds or not: its stderr is what counts
	if n := logs.Len(); n > podspec.MaxOutput+512 || !strings.Contains(logs.String(), "CNI plugin wrote to stderr") {
		t.Errorf("logged %d bytes for the plugin's stderr, want its first %d bytes", n, podspec.MaxOutput)
	}
	if fi, err := stderrFile.Stat(); err != nil || fi.Size() != 0 {
		t.Errorf("the plugin's stderr went to the daemon's: %v bytes (%v)", fi.Size(), err)
	}
}
