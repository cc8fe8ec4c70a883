package daemon

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/staticpodd/staticpodd/agent/cri"
	"github.com/staticpodd/staticpodd/oci/image"
)

// CRIImages is the CRI image service's store: the node's image store and
// puller (NewPuller's: its mirrors, credentials, slots and deadlines).
// Pulled, if not nil, is called after each pull through the CRI, so that
// pods waiting for an image (imagePullPolicy: Never) try again, as after an
// import.
type CRIImages struct {
	Store  *image.Store
	Puller *image.Puller
	Pulled func()
}

var _ cri.ImageStore = CRIImages{}

func (c CRIImages) List() ([]cri.Image, error) {
	imgs, err := c.Store.List()
	if err != nil {
		return nil, err
	}
	out := make([]cri.Image, len(imgs))
	for i, img := range imgs {
		out[i] = criImage(img)
	}
	return out, nil
}

func (c CRIImages) Get(ref string) (cri.Image, error) {
	img, err := c.Store.Get(ref)
	return criImage(img), err
}

func (c CRIImages) Pull(ctx context.Context, ref string, auth *cri.Auth) (cri.Image, error) {
	o := image.PullOptions{}
	if auth != nil {
		o.Auth = &authn.AuthConfig{Username: auth.Username, Password: auth.Password,
			IdentityToken: auth.IdentityToken, RegistryToken: auth.RegistryToken}
	}
	img, err := c.Puller.PullWith(ctx, ref, o)
	if err != nil {
		return cri.Image{}, refusal(err)
	}
	if c.Pulled != nil {
		c.Pulled()
	}
	return criImage(img), nil
}

func (c CRIImages) Remove(id string) error { return c.Store.Remove(id) }

func (c CRIImages) Usage() (cri.Usage, error) {
	bytes, inodes, err := c.Store.Usage()
	return cri.Usage{Mountpoint: c.Store.Root(), Bytes: bytes, Inodes: inodes}, err
}

func criImage(img image.Image) cri.Image {
	return cri.Image{ID: img.ID, Refs: img.Refs, RepoDigests: img.RepoDigests, Size: img.Size,
		Created: img.Created, Config: img.Config, Layers: img.Layers, Pinned: img.Pinned}
}
