package cri

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Image is one image of the store, as the image service reports it.
type Image struct {
	ID string // sha256:<config digest>
	// Refs are the image's normalised references: tags
	// (docker.io/library/busybox:1.37) and digest references
	// (repository@sha256:…).
	Refs []string
	// RepoDigests are the repository@manifest-digest references the image
	// was pulled by; none for an imported image.
	RepoDigests []string
	Size        int64 // bytes of the layers, uncompressed
	Created     time.Time
	Config      imagespec.ImageConfig
	Layers      []string // diff IDs, base first
	Pinned      bool
}

// Auth is a pull's own registry credential, from the CRI's AuthConfig.
type Auth struct {
	Username, Password string
	IdentityToken      string
	RegistryToken      string
}

// Usage is what the image store takes of its filesystem.
type Usage struct {
	Mountpoint    string // the store's directory
	Bytes, Inodes uint64
}

// ImageStore is staticpodd's image store and its puller, as the image
// service uses them (the daemon's is over oci/image).
type ImageStore interface {
	// List returns every image.
	List() ([]Image, error)
	// Get finds an image by reference, ID or ID prefix; a missing one is an
	// error wrapping podspec.ErrImageNotPresent.
	Get(ref string) (Image, error)
	// Pull fetches ref as the node pulls: its registry's mirrors, the pull
	// slots of serializeImagePulls and maxParallelImagePulls, the progress
	// deadline. auth, if not nil, is the credential of ref's registry,
	// sent to no other host.
	Pull(ctx context.Context, ref string, auth *Auth) (Image, error)
	// Remove forgets the image with ID id, all its references with it.
	Remove(id string) error
	// Usage walks the store.
	Usage() (Usage, error)
}

// Bounds of what an image service client sends. A reference is at most
// 255 characters of name (the distribution spec), a tag 128 and a digest
// 71; a credential is at most an OAuth token of a few KiB.
const (
	maxRefLen  = 1024
	maxAuthLen = 16 << 10
	// streamChunk is how many images one StreamImages message holds.
	streamChunk = 100
	// usageTTL is how long a walk of the store answers ImageFsInfo: the
	// walk reads every inode of the store, and the kubelet asks every 10s
	// at most (as containerd, which walks its snapshots every 10s).
	usageTTL = 10 * time.Second
)

// ImageService is the CRI's image service over staticpodd's image store.
type ImageService struct {
	runtimeapi.UnimplementedImageServiceServer
	store  ImageStore
	logger *slog.Logger

	// usageMu makes callers of ImageFsInfo share one walk at a time, and
	// guards the last one.
	usageMu   sync.Mutex
	usage     Usage
	usageTime time.Time
}

var _ runtimeapi.ImageServiceServer = (*ImageService)(nil)

// NewImageService returns the image service over store.
func NewImageService(store ImageStore, logger *slog.Logger) *ImageService {
	return &ImageService{store: store, logger: logger}
}

// ListImages lists every image, or with a filter the one image it names
// (none if there is none). containerd ignores the filter; crictl filters
// again on its side, so both answers list the same.
func (s *ImageService) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := s.list(req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

// StreamImages is ListImages in messages of at most streamChunk images, for
// stores whose list would pass gRPC's message size.
func (s *ImageService) StreamImages(req *runtimeapi.StreamImagesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	imgs, err := s.list(req.GetFilter())
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(imgs, streamChunk) {
		if err := stream.Send(&runtimeapi.StreamImagesResponse{Images: chunk}); err != nil {
			return err
		}
	}
	return nil
}

func (s *ImageService) list(f *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if ref := f.GetImage().GetImage(); ref != "" {
		img, err := s.get(ref)
		if err != nil || img == nil {
			return nil, err
		}
		return []*runtimeapi.Image{toCRI(*img)}, nil
	}
	all, err := s.store.List()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list images: %v", err)
	}
	out := make([]*runtimeapi.Image, len(all))
	for i, img := range all {
		out[i] = toCRI(img)
	}
	return out, nil
}

// get finds the image ref names; none is nil, without error. A
// repository digest an image was pulled by names it too, as in
// containerd, where it is one of the image's references: the store keeps
// it beside them.
func (s *ImageService) get(ref string) (*Image, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	img, err := s.store.Get(ref)
	if errors.Is(err, podspec.ErrImageNotPresent) {
		return s.byRepoDigest(ref)
	}
	if err != nil {
		// What is not a reference, nor an ID, nor a prefix of one.
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &img, nil
}

func (s *ImageService) byRepoDigest(ref string) (*Image, error) {
	norm, err := podspec.NormalizeImage(ref)
	if err != nil || !strings.Contains(norm, "@") {
		return nil, nil
	}
	all, err := s.store.List()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list images: %v", err)
	}
	for _, img := range all {
		if slices.Contains(img.RepoDigests, norm) {
			return &img, nil
		}
	}
	return nil, nil
}

func checkRef(ref string) error {
	if ref == "" {
		return status.Error(codes.InvalidArgument, "no image given")
	}
	if len(ref) > maxRefLen {
		return status.Errorf(codes.InvalidArgument, "image reference of %d bytes: more than %d", len(ref), maxRefLen)
	}
	return nil
}

// ImageStatus is the image the request names, nil if there is none (as the
// CRI requires: the kubelet reads a nil image as "not present"); verbose
// adds the image's config and chain ID, as containerd's "info".
func (s *ImageService) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	img, err := s.get(req.GetImage().GetImage())
	if err != nil || img == nil {
		return &runtimeapi.ImageStatusResponse{}, err
	}
	resp := &runtimeapi.ImageStatusResponse{Image: toCRI(*img)}
	if req.GetVerbose() {
		info, err := verboseInfo(*img)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "image %s: %v", img.ID, err)
		}
		resp.Info = map[string]string{"info": info}
	}
	return resp, nil
}

// PullImage pulls the image through the node's puller and answers its ID,
// as containerd does (the kubelet keeps it as the container's image ref).
// The pull is bounded by the puller (PullTimeout, the progress deadline),
// and ends with the call.
func (s *ImageService) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	norm, err := podspec.NormalizeImage(ref)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "image %q: %v", ref, err)
	}
	auth, err := parseAuth(req.GetAuth(), registryOf(norm))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "image %s: credential: %v", norm, err)
	}
	img, err := s.store.Pull(ctx, norm, auth)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unknown, "%v", err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

// RemoveImage removes the image the request names with all its references,
// as the CRI requires, and succeeds if there is none. As containerd, it does
// not refuse an image a container runs from: the container keeps its
// layers (the store deletes a layer once no image and no container's
// snapshot uses it), and its next start needs the image again, pulled or
// imported as its imagePullPolicy allows. The kubelet's image garbage
// collection never removes an image in use; crictl rmi does what it is told.
func (s *ImageService) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	img, err := s.get(req.GetImage().GetImage())
	if err != nil {
		return nil, err
	}
	if img != nil {
		err := s.store.Remove(img.ID)
		if err != nil && !errors.Is(err, podspec.ErrImageNotPresent) {
			return nil, status.Errorf(codes.Internal, "remove image %s: %v", img.ID, err)
		}
		s.logger.Info("image removed through the CRI", "image", img.ID, "refs", img.Refs)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo is the space and inodes the image store takes (its layers and
// the containers' writable layers, as containerd's snapshotter reports), on
// the filesystem of its directory.
func (s *ImageService) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	u, at, err := s.storeUsage()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "image filesystem: %v", err)
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  at.UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: u.Mountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: u.Bytes},
		InodesUsed: &runtimeapi.UInt64Value{Value: u.Inodes},
	}}}, nil
}

// storeUsage is the last walk of the store if younger than usageTTL, else a
// new one.
func (s *ImageService) storeUsage() (Usage, time.Time, error) {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if !s.usageTime.IsZero() && time.Since(s.usageTime) < usageTTL {
		return s.usage, s.usageTime, nil
	}
	u, err := s.store.Usage()
	if err != nil {
		return Usage{}, time.Time{}, err
	}
	s.usage, s.usageTime = u, time.Now()
	return u, s.usageTime, nil
}

// toCRI is img as containerd's CRI reports it: tags in RepoTags, digest
// references and the digests it was pulled by in RepoDigests, the image's
// user as a UID if numeric, else as a name.
func toCRI(img Image) *runtimeapi.Image {
	out := &runtimeapi.Image{Id: img.ID, Size: uint64(max(img.Size, 0)), Pinned: img.Pinned}
	for _, r := range img.Refs {
		if strings.Contains(r, "@") {
			out.RepoDigests = append(out.RepoDigests, r)
		} else {
			out.RepoTags = append(out.RepoTags, r)
		}
	}
	for _, d := range img.RepoDigests {
		if !slices.Contains(out.RepoDigests, d) {
			out.RepoDigests = append(out.RepoDigests, d)
		}
	}
	slices.Sort(out.RepoDigests)
	// containerd's getUserFromImage: the user of "user:group".
	if user, _, _ := strings.Cut(img.Config.User, ":"); user != "" {
		if uid, err := strconv.ParseInt(user, 10, 64); err == nil {
			out.Uid = &runtimeapi.Int64Value{Value: uid}
		} else {
			out.Username = user
		}
	}
	return out
}

// verboseInfo is the "info" of a verbose ImageStatus, in containerd's
// shape: the image's chain ID and its OCI image config.
func verboseInfo(img Image) (string, error) {
	spec := imagespec.Image{
		Config: img.Config,
		RootFS: imagespec.RootFS{Type: "layers", DiffIDs: make([]digest.Digest, len(img.Layers))},
	}
	for i, l := range img.Layers {
		spec.RootFS.DiffIDs[i] = digest.Digest(l)
	}
	if !img.Created.IsZero() {
		spec.Created = &img.Created
	}
	spec.OS = "linux"
	b, err := json.Marshal(struct {
		ChainID   string          `json:"chainID"`
		ImageSpec imagespec.Image `json:"imageSpec"`
	}{chainID(img.Layers), spec})
	return string(b), err
}

// chainID is the OCI chain ID of the layers (image-spec's config.md):
// ChainID(L0) = DiffID(L0), ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln)).
func chainID(layers []string) string {
	if len(layers) == 0 {
		return ""
	}
	id := layers[0]
	for _, l := range layers[1:] {
		sum := sha256.Sum256([]byte(id + " " + l))
		id = "sha256:" + hex.EncodeToString(sum[:])
	}
	return id
}

// registryOf is the registry of a normalised reference (docker.io for
// Docker Hub).
func registryOf(norm string) string {
	host, _, _ := strings.Cut(norm, "/")
	return host
}

// parseAuth is the credential a pull of an image of registry is given, as
// containerd's ParseAuth reads it: none for a credential of another server
// (ServerAddress, which the kubelet fills with the Docker config's key that
// matched); the username and password, else the identity token, else the
// base64 user:password of Auth. A registry token is passed on as is.
func parseAuth(a *runtimeapi.AuthConfig, registry string) (*Auth, error) {
	if a == nil {
		return nil, nil
	}
	if n := len(a.Username) + len(a.Password) + len(a.Auth) + len(a.ServerAddress) + len(a.IdentityToken) + len(a.RegistryToken); n > maxAuthLen {
		return nil, fmt.Errorf("%d bytes: more than %d", n, maxAuthLen)
	}
	if a.ServerAddress != "" {
		host, err := serverHost(a.ServerAddress)
		if err != nil {
			return nil, err
		}
		if host != registry {
			return nil, nil
		}
	}
	switch {
	case a.Username != "":
		return &Auth{Username: a.Username, Password: a.Password}, nil
	case a.IdentityToken != "":
		return &Auth{IdentityToken: a.IdentityToken}, nil
	case a.Auth != "":
		dec, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return nil, fmt.Errorf("auth is not base64: %v", err)
		}
		user, pass, ok := strings.Cut(string(dec), ":")
		if !ok {
			return nil, errors.New("auth is not base64 of user:password")
		}
		return &Auth{Username: user, Password: strings.Trim(pass, "\x00")}, nil
	case a.RegistryToken != "":
		return &Auth{RegistryToken: a.RegistryToken}, nil
	}
	return nil, nil // anonymous
}

// serverHost is the registry a ServerAddress names, with or without a
// scheme and path, Docker Hub's hosts spelled docker.io as references are.
func serverHost(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("server address %q: not a host", addr)
	}
	switch u.Host {
	case "index.docker.io", "registry-1.docker.io":
		return "docker.io", nil
	}
	return u.Host, nil
}
