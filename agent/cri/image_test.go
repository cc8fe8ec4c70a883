package cri

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// fakeImages is an ImageStore in memory, recording what was asked of it.
type fakeImages struct {
	mu      sync.Mutex
	images  []Image
	pulls   []pullCall
	removed []string
	usages  int
	pullErr error
}

type pullCall struct {
	ref  string
	auth *Auth
}

func (f *fakeImages) List() ([]Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.images), nil
}

func (f *fakeImages) Get(ref string) (Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	norm, nerr := podspec.NormalizeImage(ref)
	for _, img := range f.images {
		if (nerr == nil && slices.Contains(img.Refs, norm)) || (len(ref) >= 12 && strings.HasPrefix(strings.TrimPrefix(img.ID, "sha256:"), strings.TrimPrefix(ref, "sha256:"))) {
			return img, nil
		}
	}
	if nerr != nil {
		return Image{}, nerr
	}
	return Image{}, fmt.Errorf("image %s: %w", ref, podspec.ErrImageNotPresent)
}

func (f *fakeImages) Pull(ctx context.Context, ref string, auth *Auth) (Image, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, pullCall{ref, auth})
	err := f.pullErr
	f.mu.Unlock()
	if err != nil {
		return Image{}, err
	}
	return f.Get(ref)
}

func (f *fakeImages) Remove(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	f.images = slices.DeleteFunc(f.images, func(img Image) bool { return img.ID == id })
	return nil
}

func (f *fakeImages) Usage() (Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usages++
	return Usage{Mountpoint: "/var/lib/staticpodd/images", Bytes: 4 << 20, Inodes: 321}, nil
}

const (
	busyboxID = "sha256:6fd955f66c231c1a946653170d096a28ac2b2052a02080c0b84ec082a07f7d12"
	pauseID   = "sha256:0184c1613d92931126feb4c548e5da11015513b9e4c104e7305ee8b53b50a9da"
	layerA    = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	layerB    = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func testImages() *fakeImages {
	return &fakeImages{images: []Image{
		{
			ID:          busyboxID,
			Refs:        []string{"docker.io/library/busybox:1.37", "docker.io/library/busybox:latest"},
			RepoDigests: []string{"docker.io/library/busybox@sha256:" + strings.Repeat("d", 64)},
			Size:        4 << 20,
			Created:     time.Date(2024, 9, 26, 21, 31, 42, 0, time.UTC),
			Config:      imagespec.ImageConfig{User: "1000:1000", Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}},
			Layers:      []string{layerA, layerB},
		},
		{
			ID:     pauseID,
			Refs:   []string{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause@sha256:" + strings.Repeat("e", 64)},
			Size:   -1, // never negative on the wire
			Config: imagespec.ImageConfig{User: "65535"},
			Layers: []string{layerA},
			Pinned: true,
		},
		{ID: "sha256:" + strings.Repeat("f", 64), Config: imagespec.ImageConfig{User: "nobody"}},
	}}
}

func newTestImageService(f *fakeImages) *ImageService {
	return NewImageService(f, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// The images are reported as containerd's CRI reports them.
func TestListImagesAsContainerd(t *testing.T) {
	s := newTestImageService(testImages())
	resp, err := s.ListImages(t.Context(), &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Images
	if len(got) != 3 {
		t.Fatalf("%d images, want 3", len(got))
	}
	bb := got[0]
	if bb.Id != busyboxID || !slices.Equal(bb.RepoTags, []string{"docker.io/library/busybox:1.37", "docker.io/library/busybox:latest"}) ||
		!slices.Equal(bb.RepoDigests, []string{"docker.io/library/busybox@sha256:" + strings.Repeat("d", 64)}) ||
		bb.Size != 4<<20 || bb.Uid.GetValue() != 1000 || bb.Username != "" || bb.Pinned {
		t.Errorf("busybox = %v", bb)
	}
	pause := got[1]
	if !slices.Equal(pause.RepoTags, []string{"registry.k8s.io/pause:3.10"}) || len(pause.RepoDigests) != 1 ||
		pause.Size != 0 || pause.Uid.GetValue() != 65535 || !pause.Pinned {
		t.Errorf("pause = %v", pause)
	}
	if untagged := got[2]; untagged.RepoTags != nil || untagged.Uid != nil || untagged.Username != "nobody" {
		t.Errorf("untagged = %v", untagged)
	}

	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"busybox:1.37", []string{busyboxID}},
		{"docker.io/library/busybox:latest", []string{busyboxID}},
		{pauseID[len("sha256:"):][:12], []string{pauseID}},
		{"busybox:1.36", nil},
		// The repository digest busybox was pulled by, and the short name of it.
		{"docker.io/library/busybox@sha256:" + strings.Repeat("d", 64), []string{busyboxID}},
		{"busybox@sha256:" + strings.Repeat("d", 64), []string{busyboxID}},
		{"busybox@sha256:" + strings.Repeat("0", 64), nil},
	} {
		resp, err := s.ListImages(t.Context(), &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: tc.filter}}})
		if err != nil {
			t.Fatalf("filter %s: %v", tc.filter, err)
		}
		var ids []string
		for _, img := range resp.Images {
			ids = append(ids, img.Id)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("filter %s: %v, want %v", tc.filter, ids, tc.want)
		}
	}
}

// ImageStatus of a missing image is a nil image, not an error (the kubelet
// reads it as "not present"), through gRPC as the kubelet calls it; verbose
// gives containerd's info.
func TestImageStatusOverGRPC(t *testing.T) {
	client := grpcImageClient(t, newTestImageService(testImages()))
	resp, err := client.ImageStatus(t.Context(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	if err != nil || resp.Image != nil {
		t.Fatalf("status of a missing image: %v, %v; want a nil image and no error", resp, err)
	}
	resp, err = client.ImageStatus(t.Context(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.37"}, Verbose: true})
	if err != nil || resp.Image.GetId() != busyboxID {
		t.Fatalf("status: %v, %v", resp, err)
	}
	var info struct {
		ChainID   string          `json:"chainID"`
		ImageSpec imagespec.Image `json:"imageSpec"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		t.Fatalf("info %q: %v", resp.Info["info"], err)
	}
	sum := sha256.Sum256([]byte(layerA + " " + layerB))
	if info.ChainID != "sha256:"+hex.EncodeToString(sum[:]) || len(info.ImageSpec.RootFS.DiffIDs) != 2 ||
		!slices.Equal(info.ImageSpec.Config.Env, []string{"PATH=/bin"}) || info.ImageSpec.Created == nil {
		t.Errorf("info = %+v", info)
	}
	if chainID([]string{layerA}) != layerA {
		t.Errorf("chain ID of one layer = %s, want the layer", chainID([]string{layerA}))
	}

	for _, ref := range []string{"", strings.Repeat("a", maxRefLen+1), "Not A Reference"} {
		_, err := client.ImageStatus(t.Context(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("status of %.20q: %v, want InvalidArgument", ref, err)
		}
	}
	stream, err := client.StreamImages(t.Context(), &runtimeapi.StreamImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(m.Images)
	}
	if n != 3 {
		t.Errorf("StreamImages gave %d images, want 3", n)
	}
}

func grpcImageClient(t *testing.T, s *ImageService) runtimeapi.ImageServiceClient {
	t.Helper()
	l := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(srv, s)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return l.DialContext(ctx)
	}), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewImageServiceClient(conn)
}

// PullImage pulls the normalised reference with the credential of the
// request read as containerd reads it, and answers the image ID.
func TestPullImageCredentials(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name  string
		image string
		auth  *runtimeapi.AuthConfig
		want  *Auth
		code  codes.Code
	}{
		{name: "anonymous", image: "busybox:1.37"},
		{name: "user", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{Username: "u", Password: "p"}, want: &Auth{Username: "u", Password: "p"}},
		{name: "auth", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{Auth: b64("u:p:q\x00")}, want: &Auth{Username: "u", Password: "p:q"}},
		{name: "identity token", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{IdentityToken: "tok"}, want: &Auth{IdentityToken: "tok"}},
		{name: "docker hub's key", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{ServerAddress: "https://index.docker.io/v1/", Username: "u"}, want: &Auth{Username: "u"}},
		{name: "another server's", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{ServerAddress: "quay.io", Username: "u"}},
		{name: "its server's", image: "registry.k8s.io/pause:3.10", auth: &runtimeapi.AuthConfig{ServerAddress: "registry.k8s.io", Username: "u"}, want: &Auth{Username: "u"}},
		{name: "bad base64", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{Auth: "!!"}, code: codes.InvalidArgument},
		{name: "no colon", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{Auth: b64("up")}, code: codes.InvalidArgument},
		{name: "huge", image: "busybox:1.37", auth: &runtimeapi.AuthConfig{IdentityToken: strings.Repeat("t", maxAuthLen+1)}, code: codes.InvalidArgument},
		{name: "bad ref", image: "BusyBox", code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testImages()
			s := newTestImageService(f)
			resp, err := s.PullImage(t.Context(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: tc.image}, Auth: tc.auth})
			if status.Code(err) != tc.code {
				t.Fatalf("PullImage: %v, want %v", err, tc.code)
			}
			if tc.code != codes.OK {
				if len(f.pulls) != 0 {
					t.Fatalf("pulled %v after a refused request", f.pulls)
				}
				if strings.Contains(err.Error(), "tttt") {
					t.Fatal("the error repeats the credential")
				}
				return
			}
			norm, _ := podspec.NormalizeImage(tc.image)
			if len(f.pulls) != 1 || f.pulls[0].ref != norm || fmt.Sprint(f.pulls[0].auth) != fmt.Sprint(tc.want) {
				t.Fatalf("pulls = %+v, want %s with %+v", f.pulls, norm, tc.want)
			}
			if img, _ := f.Get(norm); resp.ImageRef != img.ID {
				t.Fatalf("image ref %s, want the image ID %s", resp.ImageRef, img.ID)
			}
		})
	}
	f := testImages()
	f.pullErr = fmt.Errorf("pull docker.io/library/nope:1: 127.0.0.1:5000: MANIFEST_UNKNOWN")
	_, err := newTestImageService(f).PullImage(t.Context(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nope:1"}})
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "MANIFEST_UNKNOWN") {
		t.Fatalf("failed pull: %v, want the puller's error", err)
	}
	// The image policy's refusal: the kubelet strips an Unknown status to
	// its message, and reads SignatureValidationFailed from its start.
	f.pullErr = errors.New("SignatureValidationFailed: docker.io/library/nope@sha256:0a: no signature by key cosign.pub")
	_, err = newTestImageService(f).PullImage(t.Context(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nope:1"}})
	if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != f.pullErr.Error() {
		t.Fatalf("refused pull: %v, want Unknown with the refusal as its message", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := newTestImageService(f).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nope:1"}}); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled pull: %v, want Canceled", err)
	}
}

// RemoveImage removes the whole image whichever reference names it, and a
// missing image is no error (the CRI's RemoveImage is idempotent).
func TestRemoveImage(t *testing.T) {
	f := testImages()
	s := newTestImageService(f)
	for _, ref := range []string{"busybox:1.37", "busybox:latest", busyboxID} {
		if _, err := s.RemoveImage(t.Context(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("remove %s: %v", ref, err)
		}
	}
	if !slices.Equal(f.removed, []string{busyboxID}) {
		t.Fatalf("removed %v, want busybox's ID once", f.removed)
	}
	if _, err := s.RemoveImage(t.Context(), &runtimeapi.RemoveImageRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("remove of nothing: %v, want InvalidArgument", err)
	}
}

// ImageFsInfo reports the store's walk, walked once per usageTTL however
// often it is asked.
func TestImageFsInfo(t *testing.T) {
	f := testImages()
	s := newTestImageService(f)
	for range 3 {
		resp, err := s.ImageFsInfo(t.Context(), &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		fs := resp.ImageFilesystems
		if len(fs) != 1 || fs[0].FsId.GetMountpoint() != "/var/lib/staticpodd/images" || fs[0].UsedBytes.GetValue() != 4<<20 ||
			fs[0].InodesUsed.GetValue() != 321 || fs[0].Timestamp <= 0 {
			t.Fatalf("ImageFsInfo = %v", resp)
		}
	}
	if f.usages != 1 {
		t.Fatalf("the store was walked %d times, want once", f.usages)
	}
	s.usageTime = time.Now().Add(-usageTTL)
	if _, err := s.ImageFsInfo(t.Context(), &runtimeapi.ImageFsInfoRequest{}); err != nil || f.usages != 2 {
		t.Fatalf("after the TTL: %v, %d walks; want a new one", err, f.usages)
	}
}

// A pull without a deadline of its client's gets none of the server's
// either: the puller bounds it. Any other call does.
func TestPullImageHasNoCallTimeout(t *testing.T) {
	for method, want := range map[string]bool{
		runtimeapi.ImageService_PullImage_FullMethodName:   false,
		runtimeapi.ImageService_ImageStatus_FullMethodName: true,
	} {
		deadline(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, _ any) (any, error) {
			if _, ok := ctx.Deadline(); ok != want {
				t.Errorf("%s: deadline %v, want %v", method, ok, want)
			}
			return nil, nil
		})
	}
}
