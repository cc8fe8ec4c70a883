// Package cri serves the Container Runtime Interface (k8s.io/cri-api v1) on
// a unix socket, <run-dir>/cri.sock, for kubeadm and crictl: the runtime
// service answered from staticpodd's own state (its pods, sandboxes,
// containers, stats, logs and exec), and the image service of image.go.
// Pods come from manifests: creating sandboxes or containers over the CRI
// is Unimplemented; stopping and removing them is what kubeadm reset needs.
package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	"github.com/staticpodd/staticpodd/agent/server"
)

// Bounds of the CRI socket's clients.
const (
	// MaxConns is how many connections are served at once, as the CLI
	// socket's: kubeadm and the kubelet hold one each, crictl one a command.
	MaxConns = server.CLIMaxConns
	// maxRecvMsgSize bounds a request: the largest a CRI client sends is a
	// PullImage with its credentials or an ExecSync's command, a few KiB.
	maxRecvMsgSize = 1 << 20
	// maxSendMsgSize bounds an answer: the kubelet's CRI client accepts
	// 16 MiB (maxMsgSize in k8s.io/cri-client), and a list of a few
	// hundred containers is well under 1 MiB.
	maxSendMsgSize = 16 << 20
	// maxStreams is how many calls one connection has in flight.
	maxStreams = 64
	// callTimeout bounds a call whose client set no deadline; ExecSync
	// runs within its own timeout (execSyncTimeout).
	callTimeout = 2 * time.Minute
	// connectionTimeout bounds the HTTP/2 preface of a new connection.
	connectionTimeout = 10 * time.Second
)

// Config is what the CRI server answers from.
type Config struct {
	// Agent is staticpodd's state; see Agent.
	Agent Agent
	// Images is the image service; nil serves none.
	Images runtimeapi.ImageServiceServer
	// Version is staticpodd's, the RuntimeVersion of Version.
	Version string
	// ManifestDir is where pods come from (staticPodPath), named by the
	// answer to the calls that would create one.
	ManifestDir string
	// CgroupDriver is "systemd" or "cgroupfs", as RuntimeConfig says it.
	CgroupDriver string
	// StreamAddress is the address exec's streaming server listens on:
	// 127.0.0.1:0 (a port of the kernel's choosing), as containerd's.
	StreamAddress string
	Logger        *slog.Logger
}

// Server is the CRI's gRPC server and exec's streaming server.
type Server struct {
	cfg     Config
	grpc    *grpc.Server
	streams streaming.Server
	// streamListener is where streams are served: the URL Exec returns.
	streamListener net.Listener
	streamHTTP     *http.Server
	rt             *runtimeService
}

// New makes the server and binds its streaming server; Serve serves both.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StreamAddress == "" {
		cfg.StreamAddress = "127.0.0.1:0"
	}
	s := &Server{cfg: cfg}
	s.rt = &runtimeService{cfg: cfg}
	l, err := net.Listen("tcp", cfg.StreamAddress)
	if err != nil {
		return nil, fmt.Errorf("CRI streaming server: %w", err)
	}
	sc := streaming.DefaultConfig
	sc.Addr = l.Addr().String()
	// An idle exec (no byte either way) ends after this; the kubelet's is 4h.
	sc.StreamIdleTimeout = streamIdleTimeout
	s.streams, err = streaming.NewServer(sc, streamRuntime{cfg.Agent, cfg.Logger})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("CRI streaming server: %w", err)
	}
	s.streamListener = server.LimitListener(l, MaxConns, cfg.Logger.With("listener", "cri streams"))
	s.streamHTTP = &http.Server{
		Handler: s.streams,
		// The streams are upgraded connections, which these do not bound
		// once upgraded; they bound the upgrade request. An exec URL is
		// for one request, so no client needs a kept-alive connection, and
		// one left idle between requests would hold one of the MaxConns
		// slots for ever (IdleTimeout 0): every exec would then wait.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.streamHTTP.SetKeepAlivesEnabled(false)
	s.rt.streams, s.rt.streamURL = s.streams, "http://"+sc.Addr
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.MaxSendMsgSize(maxSendMsgSize),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(connectionTimeout),
		// A client that stops reading stops answering pings too: its
		// connection is closed rather than held.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(deadline, s.logCalls),
	)
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, s.rt)
	if cfg.Images != nil {
		runtimeapi.RegisterImageServiceServer(s.grpc, cfg.Images)
	}
	return s, nil
}

// streamIdleTimeout ends an exec stream that moved no byte for this long.
const streamIdleTimeout = 30 * time.Minute

// Serve serves the CRI on l (the socket, see Listen) and the exec streams
// until ctx ends; then both stop, open calls and streams cut.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	l = server.LimitListener(l, MaxConns, s.cfg.Logger.With("listener", "cri"))
	errc := make(chan error, 2)
	go func() { errc <- s.grpc.Serve(l) }()
	go func() { errc <- s.streamHTTP.Serve(s.streamListener) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.Close()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// Close stops both servers; their connections are cut.
func (s *Server) Close() {
	s.grpc.Stop()
	s.streamHTTP.Close()
	s.streamListener.Close()
}

// Listen binds the CRI socket at path, root only (0600); a stale socket
// left by an earlier daemon is replaced, anything else that is there is not.
func Listen(path string) (net.Listener, error) { return server.ListenUnix(path) }

// deadline bounds every call whose client set no deadline of its own: by
// callTimeout, or an ExecSync by its own timeout when that is longer. But
// PullImage: the kubelet, kubeadm and crictl pull with none (a pull takes
// as long as the image is large), and the puller bounds it (its progress
// deadline and PullTimeout).
func deadline(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if _, ok := ctx.Deadline(); !ok && info.FullMethod != runtimeapi.ImageService_PullImage_FullMethodName {
		timeout := callTimeout
		if r, ok := req.(*runtimeapi.ExecSyncRequest); ok && r.Timeout > 0 {
			timeout = max(timeout, execTimeout(r)+connectionTimeout)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return h(ctx, req)
}

// logCalls logs the calls that change something, and failed calls.
func (s *Server) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	begin := time.Now()
	resp, err := h(ctx, req)
	switch code := status.Code(err); {
	case code == codes.Unimplemented || code == codes.NotFound:
		s.cfg.Logger.Debug("CRI call refused", "method", info.FullMethod, "err", err)
	case err != nil:
		s.cfg.Logger.Warn("CRI call failed", "method", info.FullMethod, "err", err, "duration", time.Since(begin))
	case changes[info.FullMethod]:
		s.cfg.Logger.Info("CRI call", "method", info.FullMethod, "duration", time.Since(begin))
	}
	return resp, err
}

// changes are the calls that change the node, logged at Info.
var changes = map[string]bool{
	runtimeapi.RuntimeService_StopPodSandbox_FullMethodName:   true,
	runtimeapi.RuntimeService_RemovePodSandbox_FullMethodName: true,
	runtimeapi.RuntimeService_StopContainer_FullMethodName:    true,
	runtimeapi.RuntimeService_RemoveContainer_FullMethodName:  true,
	runtimeapi.ImageService_PullImage_FullMethodName:          true,
	runtimeapi.ImageService_RemoveImage_FullMethodName:        true,
}
