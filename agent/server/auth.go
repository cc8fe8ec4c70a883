package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// TokenReviewer checks a bearer token with the API server (a TokenReview);
// agent/mirror implements it. ok is false when the API server says the token
// is not valid; err when it could not say.
type TokenReviewer interface {
	ReviewToken(ctx context.Context, token string) (user authenticationv1.UserInfo, ok bool, err error)
}

// AccessReviewer asks the API server whether a user may do something (a
// SubjectAccessReview); agent/mirror implements it.
type AccessReviewer interface {
	ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (allowed bool, reason string, err error)
}

// Auth is how the node API authenticates and authorizes a request, as the
// kubelet's BuildAuth configures it (cmd/kubelet/app/auth.go).
type Auth struct {
	// ClientCAs returns the CAs that verify client certificates now
	// (ClientCAFile, StaticCAs); nil: no certificate is accepted.
	ClientCAs func() *x509.CertPool
	// Anonymous lets a request with no credentials in as system:anonymous.
	Anonymous bool
	// Tokens checks bearer tokens; nil: a bearer token is refused. Its
	// answers are kept TokenTTL.
	Tokens   TokenReviewer
	TokenTTL time.Duration
	// NoTokenAuthn: authentication.webhook.enabled is false, so, as in the
	// kubelet, which then has no token authenticator, an Authorization
	// header is not looked at: the request is what its certificate, or
	// the lack of one, makes it.
	NoTokenAuthn bool
	// Access decides what an authenticated user may do; nil: AlwaysAllow.
	// Its answers are kept AllowedTTL or DeniedTTL.
	Access     AccessReviewer
	AllowedTTL time.Duration
	DeniedTTL  time.Duration
	// NodeName is the name of the node resource requests are about.
	NodeName string
}

// Groups the API server gives every user (k8s.io/apiserver/pkg/authentication/user).
const (
	userAnonymous          = "system:anonymous"
	groupUnauthenticated   = "system:unauthenticated"
	groupAuthenticated     = "system:authenticated"
	maxCachedAuthDecisions = 4096
)

// guard wraps h with authentication and authorization, as the kubelet's
// InstallAuthFilter does: 401 without valid credentials, 403 when the user
// may not do what the request asks.
func (a *Auth) guard(h http.Handler, logger *slog.Logger) http.Handler {
	tokens := newTTLCache[authResult](maxCachedAuthDecisions)
	access := newTTLCache[accessResult](maxCachedAuthDecisions)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := a.authenticate(r, tokens, logger)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		// Authorized on the cleaned path, the one the mux serves (it
		// redirects any other), so that "/stats/%2e%2e/logs/" is asked as
		// nodes/log, not nodes/stats.
		subs := subresources(cleanPath(r.URL.Path))
		for _, sub := range subs {
			spec := authorizationv1.SubjectAccessReviewSpec{
				User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra(u.Extra),
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb(r.Method), Version: "v1", Resource: "nodes", Subresource: sub, Name: a.NodeName,
				},
			}
			allowed, err := a.authorize(r.Context(), spec, access)
			if err != nil {
				logger.Warn("authorization failed", "user", u.Username, "path", r.URL.Path, "err", err)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Username, verb(r.Method), sub), http.StatusInternalServerError)
				return
			}
			if allowed {
				connAuthorized(r.Context())
				h.ServeHTTP(w, r)
				return
			}
		}
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Username, verb(r.Method), subs), http.StatusForbidden)
	})
}

type authResult struct {
	user authenticationv1.UserInfo
	ok   bool
}

type accessResult struct{ allowed bool }

// authenticate follows the kubelet's chain (k8s.io/apiserver's
// DelegatingAuthenticatorConfig): the union of x509 and bearer token, then
// anonymous only when neither saw any credentials. A certificate that does
// not verify does not stop a valid token beside it, but is never
// anonymous; a token presented and refused is a refusal. With no token
// authentication (NoTokenAuthn) a token is no credential at all.
func (a *Auth) authenticate(r *http.Request, tokens *ttlCache[authResult], logger *slog.Logger) (authenticationv1.UserInfo, bool) {
	badCert := false
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.ClientCAs != nil {
		if u, err := verifyClient(r.TLS.PeerCertificates, a.ClientCAs()); err == nil {
			return u, true
		} else {
			logger.Debug("client certificate refused", "subject", r.TLS.PeerCertificates[0].Subject.String(), "err", err)
			badCert = true
		}
	}
	if h := r.Header.Get("Authorization"); h != "" && !a.NoTokenAuthn {
		token, found := strings.CutPrefix(h, "Bearer ")
		token = strings.TrimSpace(token)
		if !found || token == "" || a.Tokens == nil {
			return authenticationv1.UserInfo{}, false
		}
		key := sha256.Sum256([]byte(token))
		if res, ok := tokens.get(string(key[:])); ok {
			return res.user, res.ok
		}
		u, ok, err := a.Tokens.ReviewToken(r.Context(), token)
		if err != nil {
			// Not cached: the next request asks again.
			logger.Warn("token review failed", "err", err)
			return authenticationv1.UserInfo{}, false
		}
		if ok {
			u = withAuthenticated(u)
		}
		tokens.put(string(key[:]), authResult{u, ok}, a.TokenTTL)
		return u, ok
	}
	if a.Anonymous && !badCert {
		return authenticationv1.UserInfo{Username: userAnonymous, Groups: []string{groupUnauthenticated}}, true
	}
	return authenticationv1.UserInfo{}, false
}

// verifyClient is the x509 request authenticator (k8s.io/apiserver
// authentication/request/x509): the chain verified for client auth against
// roots, CN the user, O the groups.
func verifyClient(chain []*x509.Certificate, roots *x509.CertPool) (authenticationv1.UserInfo, error) {
	if roots == nil {
		return authenticationv1.UserInfo{}, errors.New("no client CA")
	}
	leaf := chain[0]
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return authenticationv1.UserInfo{}, err
	}
	if leaf.Subject.CommonName == "" {
		return authenticationv1.UserInfo{}, errors.New("no common name")
	}
	return withAuthenticated(authenticationv1.UserInfo{Username: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}), nil
}

// withAuthenticated adds system:authenticated, as the API server's
// AuthenticatedGroupAdder does.
func withAuthenticated(u authenticationv1.UserInfo) authenticationv1.UserInfo {
	if !slices.Contains(u.Groups, groupAuthenticated) {
		u.Groups = append(slices.Clone(u.Groups), groupAuthenticated)
	}
	return u
}

func (a *Auth) authorize(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec, cache *ttlCache[accessResult]) (bool, error) {
	if a.Access == nil {
		return true, nil
	}
	key := accessKey(spec)
	if res, ok := cache.get(key); ok {
		return res.allowed, nil
	}
	allowed, _, err := a.Access.ReviewAccess(ctx, spec)
	if err != nil {
		return false, err
	}
	ttl := a.DeniedTTL
	if allowed {
		ttl = a.AllowedTTL
	}
	cache.put(key, accessResult{allowed}, ttl)
	return allowed, nil
}

// accessKey is the whole question: user, groups, extra and attributes.
func accessKey(s authorizationv1.SubjectAccessReviewSpec) string {
	h := sha256.New()
	ra := s.ResourceAttributes
	fmt.Fprintf(h, "%q %q %q %q %q %q", s.User, s.UID, s.Groups, ra.Verb, ra.Subresource, ra.Name)
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, " %q=%q", k, s.Extra[k])
	}
	return string(h.Sum(nil))
}

func extra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

// verb is the API verb of an HTTP method (the kubelet's
// nodeAuthorizerAttributesGetter.GetRequestAttributes).
func verb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// subresources are the node subresources a request to path needs, any one
// of them enough, as the kubelet's GetRequestAttributes (with
// KubeletFineGrainedAuthz, on by default) maps them: /pods, /healthz and
// /configz try their own first, then proxy.
func subresources(path string) []string {
	switch {
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		return []string{"pods", "proxy"}
	case isSubpath(path, "/healthz"):
		return []string{"healthz", "proxy"}
	case isSubpath(path, "/configz"):
		return []string{"configz", "proxy"}
	case isSubpath(path, "/stats"):
		return []string{"stats"}
	case isSubpath(path, "/metrics"):
		return []string{"metrics"}
	case isSubpath(path, "/logs"):
		return []string{"log"}
	}
	return []string{"proxy"}
}

// cleanPath is path as net/http's ServeMux cleans it: rooted, no "." or
// "..", a trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// isSubpath is the kubelet's: path is sub or below it.
func isSubpath(path, sub string) bool {
	sub = strings.TrimRight(sub, "/")
	return path == sub || strings.HasPrefix(path, sub+"/")
}

// ttlCache keeps at most max answers, each until its TTL; when full, the
// expired ones go, then, if still full, all of them (a burst of distinct
// tokens cannot grow it without bound).
type ttlCache[T any] struct {
	max int
	mu  sync.Mutex // guards m
	m   map[string]ttlEntry[T]
}

type ttlEntry[T any] struct {
	v       T
	expires time.Time
}

func newTTLCache[T any](max int) *ttlCache[T] {
	return &ttlCache[T]{max: max, m: map[string]ttlEntry[T]{}}
}

func (c *ttlCache[T]) get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || time.Now().After(e.expires) {
		var zero T
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[T]) put(key string, v T, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		now := time.Now()
		for k, e := range c.m {
			if now.After(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = ttlEntry[T]{v, time.Now().Add(ttl)}
}
