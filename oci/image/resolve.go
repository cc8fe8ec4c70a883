package image

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Resolve asks the registry of ref, an image by tag, which manifest digest
// the tag names now, as podman's auto-update does, and returns the image's
// repo digest (repository@sha256:...). It goes through the hosts a pull of
// ref goes through (hosts.toml: mirrors with the resolve capability, plain
// HTTP) with the pull's credentials, takes no pull slot and gives up after
// the pull's dial/response Timeout: a registry that hangs holds only its
// own resolve. A HEAD request reads no body; a registry that answers
// without a digest gets a GET of the manifest, bounded as a pull's is.
func (p *Puller) Resolve(ctx context.Context, ref string) (string, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return "", err
	}
	r, err := name.ParseReference(norm)
	if err != nil {
		return "", err
	}
	if _, ok := r.(name.Digest); ok {
		return "", fmt.Errorf("resolve %s: an image by digest names one image, it has no tag to follow", norm)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.Timeout, fmt.Errorf("registry did not answer within %v", p.cfg.Timeout))
	defer cancel()
	registry := r.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	eps, err := endpoints(p.cfg.HostsDir, registry, p.cfg.Timeout)
	if err != nil {
		return "", err
	}
	defer func() {
		for _, ep := range eps {
			ep.client.CloseIdleConnections()
		}
	}()
	var keys authn.Keychain = p.cfg.Keyring
	if len(p.cfg.CredentialPaths) > 0 {
		if keys, err = LoadKeyring(p.cfg.CredentialPaths); err != nil {
			return "", err
		}
	}
	var errs []error
	for _, ep := range eps {
		if !ep.can(capResolve) {
			continue
		}
		d, err := p.resolveFrom(ctx, ep, keys, r)
		if err == nil {
			repoDigest := r.Context().Name() + "@" + d
			if strings.HasPrefix(repoDigest, name.DefaultRegistry+"/") {
				repoDigest = "docker.io/" + strings.TrimPrefix(repoDigest, name.DefaultRegistry+"/")
			}
			return Normalize(repoDigest)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("resolve %s: %w", norm, boundedError{context.Cause(ctx)})
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("resolve %s: no host of %s can resolve a tag (hosts.toml capabilities)", norm, registry)
	}
	return "", fmt.Errorf("resolve %s: %w", norm, boundedError{plainHTTPHint(errors.Join(errs...), p.cfg.HostsDir, registry)})
}

// resolveFrom resolves tag r at one endpoint: the digest of the manifest
// the registry serves for the node's platform, as a pull takes it.
func (p *Puller) resolveFrom(ctx context.Context, ep endpoint, keys authn.Keychain, r name.Reference) (string, error) {
	var ropts []name.Option
	if ep.scheme == "http" {
		ropts = append(ropts, name.Insecure)
	}
	reg, err := name.NewRegistry(ep.host, ropts...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", ep, err)
	}
	tag := reg.Repo(r.Context().RepositoryStr()).Tag(r.Identifier())
	rt := &endpointTransport{ep: ep, next: ep.client.Transport,
		stall: stallWatch{window: p.cfg.ProgressTimeout, rate: p.cfg.MinProgressRate}}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt),
		remote.WithAuthFromKeychain(keys),
		remote.WithPlatform(*p.cfg.Platform),
		remote.WithUserAgent("staticpodd"),
	}
	// A HEAD request first: registries do not count it against pull rate
	// limits. The digest is the one the tag names, an index's for a
	// multi-platform image: the digest a pull of the tag verifies and
	// records.
	if d, err := remote.Head(tag, opts...); err == nil && d.Digest.Hex != "" {
		return d.Digest.String(), nil
	} else if ctx.Err() != nil {
		return "", fmt.Errorf("%s: %w", ep, context.Cause(ctx))
	}
	desc, err := remote.Get(tag, opts...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", ep, clean(err))
	}
	return desc.Digest.String(), nil
}
