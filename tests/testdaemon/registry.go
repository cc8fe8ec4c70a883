package testdaemon

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// RegistryDir is the registry config dir (containerd's hosts.toml layout)
// every test daemon is given: its _default/hosts.toml sends the pulls of
// every registry, docker.io included, to a registry on 127.0.0.1 this
// process serves, so no test daemon reaches past the loopback. It holds
// busybox:latest (Image), which pods name as busybox and pull under the
// default policy Always, as the kubelet would.
var RegistryDir string

// registryHost is host:port of that registry.
var registryHost string

// startRegistry serves an in-memory registry on 127.0.0.1, writes dir's
// _default/hosts.toml for it and pushes Image as busybox:latest.
func startRegistry(dir string) (stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(l)
	registryHost = l.Addr().String()
	RegistryDir = filepath.Join(dir, "certs.d")
	if err := os.MkdirAll(filepath.Join(RegistryDir, "_default"), 0o755); err != nil {
		srv.Close()
		return nil, err
	}
	hosts := fmt.Sprintf("server = %q\n", "http://"+registryHost)
	if err := os.WriteFile(filepath.Join(RegistryDir, "_default", "hosts.toml"), []byte(hosts), 0o644); err != nil {
		srv.Close()
		return nil, err
	}
	if err := push(Image, "busybox:latest"); err != nil {
		srv.Close()
		return nil, fmt.Errorf("push %s: %w", Image, err)
	}
	return func() { srv.Close() }, nil
}

// Push puts the image of a docker-archive into the test registry as ref
// (nginx:latest, example.com/app:v1...), for test daemons to pull.
func Push(t testing.TB, archive, ref string) {
	t.Helper()
	if err := push(archive, ref); err != nil {
		t.Fatalf("push %s as %s: %v", archive, ref, err)
	}
}

func push(archive, ref string) error {
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	// Every registry's repositories live side by side in the one registry,
	// as the _default hosts.toml sends them there.
	repo := strings.TrimPrefix(r.Context().RepositoryStr(), "/")
	dst, err := name.ParseReference(registryHost+"/"+repo+":"+r.Identifier(), name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(dst, img)
}
