package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// ImagePolicy reads cfg's image signature policy (imagePolicyFile): nil,
// which accepts every image, without one. The error names the file, the
// field of it and why.
func ImagePolicy(cfg *config.Config) (*policy.Policy, error) {
	if cfg.ImagePolicyFile == "" {
		return nil, nil
	}
	p, err := policy.Load(cfg.ImagePolicyFile)
	if err != nil {
		return nil, fmt.Errorf("imagePolicyFile: %w", err)
	}
	return p, nil
}

// OpenImages opens the image store under cfg's root dir with the import
// reserve and the image policy of cfg, as the daemon does and every CLI
// command that brings images in (import, pull, bundles): an image meets the
// same policy whichever way it arrives. It also returns the images already
// in the store the policy refuses.
func OpenImages(cfg *config.Config, logger *slog.Logger) (*image.Store, []image.Image, error) {
	p, err := ImagePolicy(cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := image.Open(filepath.Join(cfg.RootDir, "images"), logger, ImageReserve(cfg))
	if err != nil {
		return nil, nil, err
	}
	refused, err := s.SetPolicy(p)
	if err != nil {
		return nil, nil, fmt.Errorf("image policy %s: %w", cfg.ImagePolicyFile, err)
	}
	return s, refused, nil
}

// logRefused says which images of the store the policy now refuses: they
// stay, and a container of one does not start (SignatureValidationFailed).
func logRefused(logger *slog.Logger, refused []image.Image) {
	for _, img := range refused {
		reason := ""
		if v := img.Verification; v != nil {
			reason = v.Reason
		}
		logger.Warn("image refused by the image policy; its containers will not start", "image", imageName(img), "id", img.ID, "reason", reason)
	}
}

// imageName is how an image is named in a message: its first reference, or
// its ID.
func imageName(img image.Image) string {
	if len(img.Refs) > 0 {
		return img.Refs[0]
	}
	return img.ID
}

// reloadImagePolicy reads the image policy file again (a reload): a file
// that does not load keeps the running policy and returns why, for
// STATUS=; one that does becomes the store's, and the images it refuses
// are logged.
func (d *System) reloadImagePolicy(cfg *config.Config) string {
	p, err := ImagePolicy(cfg)
	if err != nil {
		d.logger.Error("reload: the image policy does not load; the running one stays", "err", err)
		return "image policy not reloaded: " + err.Error()
	}
	refused, err := d.images.SetPolicy(p)
	if err != nil {
		d.logger.Error("reload: the image policy is not applied", "err", err)
		return "image policy not reloaded: " + err.Error()
	}
	d.logger.Info("reload: image policy applied", "file", cfg.ImagePolicyFile, "refused", len(refused))
	logRefused(d.logger, refused)
	return ""
}
