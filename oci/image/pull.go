package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Bounds on what a registry may send before it is refused.
const (
	// maxManifestSize bounds a manifest or index, as containerd's 4 MiB.
	maxManifestSize = 4 << 20
	// maxRedirects bounds the redirects of one request, as Go's default
	// client does: go-containerregistry's own redirect check has no limit.
	maxRedirects = 10
	// maxConfigSize bounds an image config blob.
	maxConfigSize = 8 << 20
	// maxLayers bounds the layers of one image (overlayfs stacks at most 500).
	maxLayers = 500
)

// PullConfig is how a Puller reaches registries.
type PullConfig struct {
	// HostsDir holds containerd's hosts.toml layout: <dir>/<host>/hosts.toml,
	// <dir>/_default/hosts.toml. "" = no mirrors.
	HostsDir string
	// Keyring has the registry credentials; nil = anonymous, unless
	// CredentialPaths is set.
	Keyring *Keyring
	// CredentialPaths, if set, are the Docker config files read again at
	// each pull (LoadKeyring: the first found wins), so that credentials
	// changed on disk are used without a restart; Keyring is ignored.
	CredentialPaths []string
	// MaxParallel bounds the pulls from one registry that run at once
	// (the kubelet's serializeImagePulls = 1, maxParallelImagePulls);
	// 0 = no bound. Critical pulls (PullOptions.Critical) take no slot.
	MaxParallel int
	// Timeout bounds a connection, a TLS handshake and the wait for a
	// response's header; default 30s.
	Timeout time.Duration
	// ProgressTimeout is the progress deadline of a response body: one
	// that brings less than MinProgressRate bytes a second over this much
	// waiting is cancelled, and the pull fails with a StallError; default
	// DefaultProgressTimeout.
	ProgressTimeout time.Duration
	// MinProgressRate in bytes a second; default DefaultMinProgressRate.
	MinProgressRate int64
	// PullTimeout bounds one pull once it has its slot; default
	// DefaultPullTimeout.
	PullTimeout time.Duration
	// Platform is the platform taken from an index; default the host's.
	Platform *v1.Platform
}

// Puller pulls images from registries into a Store.
type Puller struct {
	store  *Store
	cfg    PullConfig
	logger *slog.Logger

	mu       sync.Mutex // guards inflight and slots
	inflight map[string]*pullCall
	slots    map[string]*registrySlots // by registry; unused without MaxParallel
}

// registrySlots are the pull slots of one registry and how many pulls hold
// or wait for them (at 0 the entry goes).
type registrySlots struct {
	ch    chan struct{}
	users int
}

// pullCall is one pull of a reference that pulls of the same reference
// started meanwhile wait for.
type pullCall struct {
	done chan struct{}
	img  Image
	err  error
	// critical is closed when a critical pull joins: the call stops
	// waiting for a slot.
	critical     chan struct{}
	criticalOnce sync.Once
}

func (c *pullCall) promote() { c.criticalOnce.Do(func() { close(c.critical) }) }

// PullOptions are how one pull is made.
type PullOptions struct {
	// Progress, if not nil, is called as layers arrive: at most every
	// 200 ms, and whenever a layer is done.
	Progress func(Progress)
	// Critical pulls (for a system-node-critical or system-cluster-critical
	// pod) never wait for a slot, so no other pull holds them back.
	Critical bool
	// Auth, if not nil, is the credential of the image's own registry for
	// this pull (the CRI's AuthConfig, which the kubelet fills from a pod's
	// pull secrets). It stands in for the Docker config's entry for that
	// registry and is never sent to another host, its mirrors included,
	// which the Docker config answers for.
	Auth *authn.AuthConfig
	// Secrets are the Docker configs of the pod's imagePullSecrets, for a
	// pull without Auth. As the kubelet's, each of their credentials that
	// matches the image (the most specific first) is tried in turn, then the
	// node's Docker config if it has one for the image; the first that pulls
	// wins, and none matching is the node's config (or anonymous) alone.
	// Like Auth, a secret's credential goes to the image's registry only.
	Secrets []podspec.PullSecret
	// As, for a pull by digest, is the tag (of the same repository) the
	// digest was resolved from, a followed tag's: the image policy judges
	// the image as that tag names it (its scope, the identity its
	// signature must claim), as a pull of the tag would; only the digest
	// gets a reference.
	As string
}

// NewPuller returns a Puller into s.
func NewPuller(s *Store, cfg PullConfig, logger *slog.Logger) *Puller {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.ProgressTimeout <= 0 {
		cfg.ProgressTimeout = DefaultProgressTimeout
	}
	if cfg.MinProgressRate <= 0 {
		cfg.MinProgressRate = DefaultMinProgressRate
	}
	if cfg.PullTimeout <= 0 {
		cfg.PullTimeout = DefaultPullTimeout
	}
	if cfg.Keyring == nil {
		cfg.Keyring = &Keyring{}
	}
	if cfg.Platform == nil {
		cfg.Platform = &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
		if runtime.GOARCH == "arm" {
			cfg.Platform.Variant = "v7"
		}
	}
	return &Puller{store: s, cfg: cfg, logger: logger, inflight: map[string]*pullCall{}, slots: map[string]*registrySlots{}}
}

// Progress is what a pull, import or export has done so far.
type Progress struct {
	// Phase is the step under way, for an import: "decompressing" a
	// compressed archive (Bytes is its size) or "reading" a stream (Bytes
	// 0), then "unpacking" its layers (Bytes 0: their size is known at the
	// end). Empty for a pull or export.
	Phase              string
	Layers, LayersDone int
	// Bytes and BytesDone count a pull's compressed layer bytes, an
	// export's bytes written.
	Bytes, BytesDone int64
}

// Pull fetches ref from its registry (or its mirrors) into the store and
// returns the image, ref among its references. An image the store already
// has under the digest the registry resolves ref to is not fetched again.
// progress, if not nil, is called as layers arrive. Pulls of the same
// reference at once share one pull.
func (p *Puller) Pull(ctx context.Context, ref string, progress func(Progress)) (Image, error) {
	return p.PullWith(ctx, ref, PullOptions{Progress: progress})
}

// PullWith is Pull with options. A pull waits for one of its registry's
// slots (MaxParallel), unless it is critical; it gives the slot up when it
// ends, and it ends when a body stalls (ProgressTimeout) or after
// PullTimeout.
func (p *Puller) PullWith(ctx context.Context, ref string, o PullOptions) (Image, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	judged, err := judgedAs(norm, o.As)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", norm, err)
	}
	progress := o.Progress
	auths, err := pullAuths(norm, o)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", norm, err)
	}
	// Pulls share one call only if they authenticate alike: one with
	// credentials must not get the failure of an anonymous one, nor one
	// pod's pull succeed with another pod's pull secret. Nor if they are
	// judged as different names.
	key := norm
	if judged != norm {
		key += "\x00as\x00" + judged
	}
	for _, a := range auths {
		key += "\x00" + authKey(a)
	}
	p.mu.Lock()
	if c, ok := p.inflight[key]; ok {
		p.mu.Unlock()
		if o.Critical {
			c.promote()
		}
		select {
		case <-c.done:
			return c.img, c.err
		case <-ctx.Done():
			return Image{}, context.Cause(ctx)
		}
	}
	c := &pullCall{done: make(chan struct{}), critical: make(chan struct{})}
	if o.Critical {
		c.promote()
	}
	p.inflight[key] = c
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, key)
		p.mu.Unlock()
		close(c.done)
	}()
	release, err := p.slot(ctx, norm, c.critical)
	if err != nil {
		c.err = fmt.Errorf("pull %s: %w", norm, err)
		return Image{}, c.err
	}
	defer release()
	pctx, cancel := context.WithTimeoutCause(ctx, p.cfg.PullTimeout, fmt.Errorf("pull not done after %v", p.cfg.PullTimeout))
	defer cancel()
	c.img, c.err = p.pull(pctx, norm, judged, auths, o.Auth == nil, progress)
	if c.err != nil && ctx.Err() == nil && pctx.Err() != nil {
		c.err = context.Cause(pctx)
	}
	switch {
	case errors.Is(c.err, policy.ErrSignatureValidationFailed):
		// The CRI's error text, which the kubelet matches at its start.
		c.err = boundedError{c.err}
	case c.err != nil:
		c.err = fmt.Errorf("pull %s: %w", norm, boundedError{c.err})
	}
	return c.img, c.err
}

// slot waits for one of the pull slots of norm's registry, and returns how
// to give it back. With no bound, or once critical is closed, it takes
// none. Slots are per registry, not per node: a registry that stalls holds
// back its own pulls only. (The kubelet's serialImagePuller has one queue
// per node.)
func (p *Puller) slot(ctx context.Context, norm string, critical <-chan struct{}) (release func(), err error) {
	if p.cfg.MaxParallel <= 0 {
		return func() {}, nil
	}
	registry := norm
	if r, err := name.ParseReference(norm); err == nil {
		registry = r.Context().RegistryStr()
	}
	p.mu.Lock()
	s := p.slots[registry]
	if s == nil {
		s = &registrySlots{ch: make(chan struct{}, p.cfg.MaxParallel)}
		p.slots[registry] = s
	}
	s.users++
	p.mu.Unlock()
	done := func() {
		p.mu.Lock()
		if s.users--; s.users == 0 {
			delete(p.slots, registry)
		}
		p.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; done() }, nil
	case <-critical:
		done()
		return func() {}, nil
	case <-ctx.Done():
		done()
		return nil, context.Cause(ctx)
	}
}

// maxErrorText bounds the text of a pull's error, which goes into a
// container's waiting message, events and the mirror pod: most of it is what
// the registries said (go-containerregistry reads up to 64 KiB of each error
// body), and a pull through several mirrors joins one error each.
const maxErrorText = 4 << 10

// boundedError is err with its text cut at maxErrorText.
type boundedError struct{ err error }

func (e boundedError) Error() string {
	s := e.err.Error()
	if len(s) <= maxErrorText {
		return s
	}
	return strings.ToValidUTF8(s[:maxErrorText], "") + "... (cut)"
}

func (e boundedError) Unwrap() error { return e.err }

// pullAuths are the credentials of the pull o of norm for its registry, to
// try in turn before the node's own: Auth, or the matching entries of the
// pull secrets.
func pullAuths(norm string, o PullOptions) ([]*authn.AuthConfig, error) {
	if o.Auth != nil {
		return []*authn.AuthConfig{o.Auth}, nil
	}
	if len(o.Secrets) == 0 {
		return nil, nil
	}
	keys, err := secretsKeyring(o.Secrets)
	if err != nil {
		return nil, err
	}
	r, err := name.ParseReference(norm)
	if err != nil {
		return nil, err
	}
	var out []*authn.AuthConfig
	for _, c := range keys.matches(registryOf(r), r.Context().RepositoryStr()) {
		out = append(out, &authn.AuthConfig{Username: c.user, Password: c.pass})
	}
	return out, nil
}

// judgedAs is the name the policy judges a pull of norm as: norm itself,
// or as, a tag of its repository that norm, by digest, was resolved from.
func judgedAs(norm, as string) (string, error) {
	if as == "" {
		return norm, nil
	}
	tag, err := Normalize(as)
	if err != nil {
		return "", err
	}
	repo, _, byDigest := strings.Cut(norm, "@")
	tagRepo, _, _ := strings.Cut(tag, "@")
	if i := strings.LastIndex(tagRepo, ":"); i > strings.LastIndex(tagRepo, "/") {
		tagRepo = tagRepo[:i]
	}
	if !byDigest || strings.Contains(tag, "@") || tagRepo != repo {
		return "", fmt.Errorf("judged as %s: not a tag of the repository of %s, by digest", bound(tag), norm)
	}
	return tag, nil
}

// registryOf is r's registry as Docker configs key it: Docker Hub's is docker.io.
func registryOf(r name.Reference) string {
	if registry := r.Context().RegistryStr(); registry != name.DefaultRegistry {
		return registry
	}
	return "docker.io"
}

// pull fetches norm with each of auths in turn, then (if none was given,
// or the node's config has credentials for the image) with the node's
// Docker config alone: the first that succeeds wins, as the kubelet's
// PullImage tries a pod's credentials. withNode says the node's config may
// be tried after auths (not for a CRI pull's own AuthConfig).
func (p *Puller) pull(ctx context.Context, norm, judged string, auths []*authn.AuthConfig, withNode bool, progress func(Progress)) (Image, error) {
	r, err := name.ParseReference(norm)
	if err != nil {
		return Image{}, err
	}
	registry := registryOf(r)
	eps, err := endpoints(p.cfg.HostsDir, registry, p.cfg.Timeout)
	if err != nil {
		return Image{}, err
	}
	// The endpoints, read again for each pull, are this pull's alone: their
	// idle connections would otherwise stay open for IdleConnTimeout after it.
	defer func() {
		for _, ep := range eps {
			ep.client.CloseIdleConnections()
		}
	}()
	node := p.cfg.Keyring
	if len(p.cfg.CredentialPaths) > 0 {
		if node, err = LoadKeyring(p.cfg.CredentialPaths); err != nil {
			return Image{}, err
		}
	}
	var keychains []authn.Keychain
	for _, a := range auths {
		keychains = append(keychains, pullAuth{registry: registry, auth: authn.FromConfig(*a), next: node})
	}
	// The kubelet's UnionDockerKeyring: the node's credentials come after the
	// pod's, and only if it has some for the image (or the pod none).
	if len(auths) == 0 || (withNode && len(node.matches(registry, r.Context().RepositoryStr())) > 0) {
		keychains = append(keychains, node)
	}
	_, byDigest := r.(name.Digest)
	var errs []error
	digest := ""
	if byDigest {
		digest = r.Identifier()
	}
	tried := false
	for _, keys := range keychains {
		for _, ep := range eps {
			if !ep.can(capPull) || (digest == "" && !ep.can(capResolve)) {
				continue
			}
			tried = true
			img, err := p.pullFrom(ctx, ep, keys, r, digest, norm, judged, progress)
			if err == nil {
				return img, nil
			}
			// A refusal is the policy's decision on what the host
			// resolved the reference to, not a host that failed: no
			// other host is asked for something else to run.
			if ctx.Err() != nil || errors.Is(err, policy.ErrSignatureValidationFailed) {
				return Image{}, err
			}
			if len(eps) > 1 || len(keychains) > 1 {
				p.logger.Warn("pull from registry host failed", "image", norm, "host", ep.String(), "err", err)
			}
			errs = append(errs, err)
		}
	}
	if !tried {
		return Image{}, fmt.Errorf("no host of %s can resolve a tag (hosts.toml capabilities)", registry)
	}
	return Image{}, plainHTTPHint(errors.Join(errs...), p.cfg.HostsDir, registry)
}

// plainHTTPHint adds to err, when a registry answered HTTPS in plain HTTP, how
// to speak plain HTTP to it: Go's transport says only what went wrong.
func plainHTTPHint(err error, hostsDir, registry string) error {
	if !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return err
	}
	dir := "<--registry-config-dir>"
	if hostsDir != "" {
		dir = hostsDir
	}
	return fmt.Errorf("%w; registry %s speaks plain HTTP: to pull from it over HTTP, write %s with the line "+
		`server = "http://%s"`+" (containerd's layout, read from --registry-config-dir at each pull)",
		err, registry, filepath.Join(hostsDirFor(dir, registry), "hosts.toml"), registry)
}

// pullFrom pulls ref (by digest if digest is set) from one endpoint; the
// policy judges it as judged names it.
func (p *Puller) pullFrom(ctx context.Context, ep endpoint, keys authn.Keychain, r name.Reference, digest, norm, judged string, progress func(Progress)) (Image, error) {
	var ropts []name.Option
	if ep.scheme == "http" {
		ropts = append(ropts, name.Insecure)
	}
	reg, err := name.NewRegistry(ep.host, ropts...)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", ep, err)
	}
	repo := reg.Repo(r.Context().RepositoryStr())
	var er name.Reference = repo.Tag(r.Identifier())
	if digest != "" {
		er = repo.Digest(digest)
	}
	rt := &endpointTransport{ep: ep, next: ep.client.Transport,
		stall: stallWatch{window: p.cfg.ProgressTimeout, rate: p.cfg.MinProgressRate}}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt),
		remote.WithAuthFromKeychain(keys),
		remote.WithPlatform(*p.cfg.Platform),
		remote.WithUserAgent("staticpodd"),
	}
	// One remote.Puller for the image and its signatures: they share the
	// endpoint's token.
	rp, err := remote.NewPuller(opts...)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", ep, err)
	}
	opts = append(opts, remote.Reuse(rp))
	desc, err := remote.Get(er, opts...)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", ep, clean(err))
	}
	img, err := desc.Image()
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", ep, clean(err))
	}
	m, err := img.Manifest()
	if err != nil {
		return Image{}, fmt.Errorf("%s: manifest: %w", ep, clean(err))
	}
	if m.Config.Size > maxConfigSize || m.Config.Size < 0 {
		return Image{}, fmt.Errorf("%s: image config of %d bytes: more than %d, refused", ep, m.Config.Size, maxConfigSize)
	}
	if len(m.Layers) > maxLayers {
		return Image{}, fmt.Errorf("%s: %d layers: more than %d, refused", ep, len(m.Layers), maxLayers)
	}
	// The digest the reference resolved to (an index's for a multi-platform
	// image, as containerd's repo digest and cosign's signatures have it)
	// is what the policy verifies and the image is recorded and run by.
	repoDigest := r.Context().Name() + "@" + desc.Digest.String()
	if strings.HasPrefix(repoDigest, name.DefaultRegistry+"/") {
		repoDigest = "docker.io/" + strings.TrimPrefix(repoDigest, name.DefaultRegistry+"/")
	}
	refs := []string{norm}
	if d, err := Normalize(repoDigest); err == nil {
		repoDigest = d
	}
	// Decided before any blob is fetched or any reference moved: a refusal
	// leaves the store as it was.
	adm, err := p.admit(ctx, repo, judged, repoDigest, desc.Digest, opts)
	if err != nil {
		return Image{}, err
	}
	if img, ok, err := p.store.addRefs(m.Config.Digest.String(), refs, repoDigest, adm); err != nil || ok {
		return img, err
	}

	var total int64
	for _, l := range m.Layers {
		total += l.Size
	}
	pr := &pullProgress{fn: progress, p: Progress{Layers: len(m.Layers), Bytes: total}, logger: p.logger, image: norm}
	rt.blobRead.Store(&pr.done)
	pr.report(true)
	src := imageSource(img, refs)
	src.admitted = adm
	config := src.config
	src.config = func() ([]byte, error) {
		b, err := config()
		return b, clean(err)
	}
	src.layer = func(d v1.Hash) (io.ReadCloser, error) {
		l, err := img.LayerByDiffID(d)
		if err != nil {
			return nil, clean(err)
		}
		return pr.layer(l)
	}
	imgs, err := p.store.importSources(ctx, "pull-", []source{src}, func(i *Image) { i.RepoDigests = []string{repoDigest} })
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", ep, clean(err))
	}
	pr.p.LayersDone = pr.p.Layers
	pr.report(true)
	return imgs[0], nil
}

// clean drops go-containerregistry's wrapping where it only repeats itself;
// a registry's own error (transport.Error) is kept whole.
func clean(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		return te
	}
	return err
}

// pullProgress counts a pull's bytes and reports them, to the log at most
// every few seconds.
type pullProgress struct {
	fn      func(Progress)
	logger  *slog.Logger
	image   string
	mu      sync.Mutex
	p       Progress
	done    atomic.Int64
	lastLog time.Time
	lastFn  time.Time
}

// The pull's log line comes at most every pullLogPeriod; its progress
// function, which may draw a terminal's bar, every pullProgressPeriod.
const (
	pullLogPeriod      = 2 * time.Second
	pullProgressPeriod = 200 * time.Millisecond
)

func (pr *pullProgress) report(force bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	// The config's bytes count too: no more than the layers' total is shown.
	pr.p.BytesDone = min(pr.done.Load(), pr.p.Bytes)
	now := time.Now()
	if force || now.Sub(pr.lastLog) >= pullLogPeriod {
		pr.lastLog = now
		pr.logger.Info("pulling image", "image", pr.image, "layers", fmt.Sprintf("%d/%d", pr.p.LayersDone, pr.p.Layers),
			"bytes", fmt.Sprintf("%d/%d", pr.p.BytesDone, pr.p.Bytes))
	}
	if pr.fn != nil && (force || now.Sub(pr.lastFn) >= pullProgressPeriod) {
		pr.lastFn = now
		pr.fn(pr.p)
	}
}

// layer opens a layer's uncompressed stream, which reports the layer done at
// its end (the bytes are counted as they come off the wire, by
// endpointTransport).
func (pr *pullProgress) layer(l v1.Layer) (io.ReadCloser, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, clean(err)
	}
	return &progressReader{rc: rc, pr: pr}, nil
}

type progressReader struct {
	rc io.ReadCloser
	pr *pullProgress
}

func (c *progressReader) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	if err == io.EOF {
		c.pr.mu.Lock()
		c.pr.p.LayersDone++
		c.pr.mu.Unlock()
		c.pr.report(true)
	} else if n > 0 {
		c.pr.report(false)
	}
	return n, clean(err)
}

func (c *progressReader) Close() error { return c.rc.Close() }

// endpointTransport sends a registry's API requests to an endpoint's path
// (a hosts.toml's override_path), refuses manifests bigger than
// maxManifestSize, and cancels a request whose body stalls.
type endpointTransport struct {
	ep    endpoint
	next  http.RoundTripper
	stall stallWatch
	// blobRead, once set, counts the bytes of blob bodies read.
	blobRead atomic.Pointer[atomic.Int64]
	// plain is set once an endpoint with fallback answered TLS in HTTP:
	// its later requests go over plain HTTP.
	plain atomic.Bool
}

func (t *endpointTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if redirects(r) >= maxRedirects {
		return nil, fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if r.URL.Host == t.ep.host {
		// go-containerregistry tries http after https for hosts like
		// 127.0.0.1 or 10.0.0.1: the endpoint's scheme is the only one
		// taken, plain HTTP only after send's fallback.
		r = r.Clone(r.Context())
		r.URL.Scheme = t.ep.scheme
		if t.plain.Load() {
			r.URL.Scheme = "http"
		}
		if t.ep.path != "/v2" && (r.URL.Path == "/v2" || strings.HasPrefix(r.URL.Path, "/v2/")) {
			r.URL.Path = t.ep.path + strings.TrimPrefix(r.URL.Path, "/v2")
			r.URL.RawPath = ""
		}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	resp, err := t.send(r.WithContext(ctx))
	if err != nil {
		cancel(nil)
		return resp, err
	}
	t.stall.watch(r, resp, cancel)
	// What was asked for, not where a redirect sent it, says what the body is.
	asked := origin(r).URL.Path
	if n := t.blobRead.Load(); n != nil && strings.Contains(asked, "/blobs/") {
		resp.Body = &countingBody{rc: resp.Body, n: n}
		return resp, nil
	}
	// A referrers list is an index, bounded as a manifest.
	if !strings.Contains(asked, "/manifests/") && !strings.Contains(asked, "/referrers/") {
		return resp, nil
	}
	host := bound(r.URL.Host)
	if resp.ContentLength > maxManifestSize {
		resp.Body.Close()
		return nil, fmt.Errorf("manifest of %d bytes from %s: more than %d, refused", resp.ContentLength, host, maxManifestSize)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: maxManifestSize, host: host}
	return resp, nil
}

// countingBody adds the bytes read to n.
type countingBody struct {
	rc io.ReadCloser
	n  *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }

// limitedBody fails a body that goes on past its limit.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	host string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("manifest from %s: more than %d bytes, refused", b.host, maxManifestSize)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		// One byte more tells an exact fit from an overflow.
		var one [1]byte
		if m, _ := b.rc.Read(one[:]); m > 0 {
			return n, fmt.Errorf("manifest from %s: more than %d bytes, refused", b.host, maxManifestSize)
		}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// addRefs gives the image with config digest id, if the store has it whole,
// the references refs and the repository digest repoDigest, records how it
// arrived this time (a), and returns it; ok is false if the store does not
// have it.
func (s *Store) addRefs(id string, refs []string, repoDigest string, a admitted) (img Image, ok bool, err error) {
	unlock, err := s.lock()
	if err != nil {
		return Image{}, false, err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, false, err
	}
	i := slices.IndexFunc(idx.Images, func(img Image) bool { return img.ID == id })
	if i < 0 {
		return Image{}, false, nil
	}
	img = idx.Images[i]
	for _, l := range img.Layers {
		if !s.hasLayer(l) {
			return Image{}, false, nil
		}
	}
	before := img
	if !slices.Contains(img.RepoDigests, repoDigest) || slices.ContainsFunc(refs, func(r string) bool { return !slices.Contains(img.Refs, r) }) {
		img.Refs = refs
		img.RepoDigests = []string{repoDigest}
		img = idx.add(img)
		// add may have dropped images before it.
		i = slices.IndexFunc(idx.Images, func(img Image) bool { return img.ID == id })
	}
	if err := s.recordLocked(&idx, i, a); err != nil {
		return Image{}, false, err
	}
	img = idx.Images[i]
	if reflect.DeepEqual(img, before) {
		return img, true, nil
	}
	unused, err := s.pruneLocked(&idx)
	if err != nil {
		return Image{}, false, err
	}
	if err := s.writeIndexLocked(idx); err != nil {
		return Image{}, false, err
	}
	if err := s.deleteLayers(unused); err != nil {
		s.logger.Warn("cannot delete unused layers after pull", "err", err)
	}
	return img, true, nil
}
