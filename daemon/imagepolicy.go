package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// ImagePolicy reads cfg's image signature policy (imagePolicyFile): nil,
// which accepts every image, without one. The error names the file, the
// field of it and why.
func ImagePolicy(cfg *config.Config) (*policy.Policy, error) {
	return loadPolicy(cfg.ImagePolicyFile)
}

func loadPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return nil, nil
	}
	p, err := policy.Load(path)
	if err != nil {
		return nil, fmt.Errorf("imagePolicyFile: %w", err)
	}
	return p, nil
}

// policyRecord is where the daemon says, under its root dir, which policy
// file it runs with (none: no such file), so that a CLI command bringing
// images into its store without --image-policy or $STATICPODD_IMAGE_POLICY
// meets the daemon's policy all the same.
func policyRecord(rootDir string) string { return filepath.Join(rootDir, "image-policy-file") }

// recordPolicy says that the daemon of cfg runs with its image policy file
// now (at its start, and after a reload read it).
func recordPolicy(cfg *config.Config) error {
	path := policyRecord(cfg.RootDir)
	if cfg.ImagePolicyFile == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return atomicfile.Write(path, []byte(cfg.ImagePolicyFile+"\n"))
}

// cliPolicyFile is the policy file a CLI command of cfg applies: its own
// (--image-policy, $STATICPODD_IMAGE_POLICY), else the one the daemon on
// the same root dir last ran with, else none.
func cliPolicyFile(cfg *config.Config) (string, error) {
	if cfg.ImagePolicyFile != "" {
		return cfg.ImagePolicyFile, nil
	}
	b, err := os.ReadFile(policyRecord(cfg.RootDir))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the daemon's image policy: %w", err)
	}
	path := strings.TrimSpace(string(b))
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("the daemon's image policy: %s names %q, not an absolute path", policyRecord(cfg.RootDir), path)
	}
	return path, nil
}

// OpenImages opens the image store under cfg's root dir for a CLI command
// that brings images in (import, pull, bundles), with the import reserve
// and the image policy every image arriving must meet: the command's own,
// else the daemon's (policyRecord), so that an image meets the same policy
// whichever way it arrives. The verdicts on the images already in the store
// are the daemon's to make (at its start and reloads), not a command's,
// which may run under another policy: it returns the images whose recorded
// verdict is a refusal.
func OpenImages(cfg *config.Config, logger *slog.Logger) (*image.Store, []image.Image, error) {
	path, err := cliPolicyFile(cfg)
	if err != nil {
		return nil, nil, err
	}
	p, err := loadPolicy(path)
	if err != nil {
		return nil, nil, err
	}
	s, err := image.Open(filepath.Join(cfg.RootDir, "images"), logger, ImageReserve(cfg), image.WithPolicy(p))
	if err != nil {
		return nil, nil, err
	}
	imgs, err := s.List()
	if err != nil {
		return nil, nil, err
	}
	var refused []image.Image
	for _, img := range imgs {
		if v := img.Verification; v != nil && v.Decision == policy.Rejected {
			refused = append(refused, img)
		}
	}
	return s, refused, nil
}

// openImages is the daemon's store, under cfg's policy (a file that does
// not load fails the start), every image in it checked against it; the
// images it refuses are logged.
func openImages(cfg *config.Config, logger *slog.Logger) (*image.Store, error) {
	p, err := ImagePolicy(cfg)
	if err != nil {
		return nil, err
	}
	s, err := image.Open(filepath.Join(cfg.RootDir, "images"), logger, ImageReserve(cfg))
	if err != nil {
		return nil, err
	}
	refused, err := s.SetPolicy(p)
	if err != nil {
		return nil, fmt.Errorf("image policy %s: %w", cfg.ImagePolicyFile, err)
	}
	if err := recordPolicy(cfg); err != nil {
		return nil, fmt.Errorf("record the image policy: %w", err)
	}
	logRefused(logger, refused)
	return s, nil
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
	if err := recordPolicy(cfg); err != nil {
		d.logger.Warn("reload: cannot record the image policy for the CLI", "err", err)
	}
	if cfg.ImagePolicyFile != "" {
		d.logger.Info("reload: image policy applied", "file", cfg.ImagePolicyFile, "refused", len(refused))
	}
	logRefused(d.logger, refused)
	return ""
}

// refusal is err as a CRI runtime gives an image policy's refusal: its text
// from "SignatureValidationFailed" on, which the kubelet matches as a prefix
// once the gRPC status is stripped (evalCRIPullErr), and the agent alike;
// what the puller said before it (which pull) is the caller's to say. Any
// other error is returned as it is.
func refusal(err error) error {
	if !errors.Is(err, policy.ErrSignatureValidationFailed) {
		return err
	}
	text := err.Error()
	i := strings.Index(text, policy.ErrSignatureValidationFailed.Error())
	if i <= 0 {
		return err
	}
	return refusedError{text: text[i:], err: err}
}

// refusedError is a refusal whose text starts with the CRI's error.
type refusedError struct {
	text string
	err  error
}

func (e refusedError) Error() string { return e.text }
func (e refusedError) Unwrap() error { return e.err }
