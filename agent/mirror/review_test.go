package mirror

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// apiServer is an HTTPS server that answers TokenReviews and
// SubjectAccessReviews with the API's own types, as kube-apiserver does,
// and a kubeconfig that trusts it and authenticates with a token.
func apiServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: node-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL, filepath.Join(dir, "ca.crt"))
	path := filepath.Join(dir, "kubelet.conf")
	os.WriteFile(path, []byte(kc), 0o600)
	return path
}

// decode reads a request body as the API server does, protobuf (client-go's
// default for built-in types) or JSON.
func decode(t *testing.T, r *http.Request, into runtime.Object) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
		return
	}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, into); err != nil {
		t.Errorf("decode %s: %v", r.Header.Get("Content-Type"), err)
	}
}

func TestReviewer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer node-token" {
			http.Error(w, "the node's own credentials were not sent", http.StatusUnauthorized)
			return
		}
		var tr authenticationv1.TokenReview
		decode(t, r, &tr)
		if tr.Spec.Token == "good" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"ops"}}}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		decode(t, r, &sar)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && ra != nil && ra.Resource == "nodes" && ra.Subresource == "stats"
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC policy matched"
		}
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(sar)
	})
	r := NewReviewer(NewCredentials(CredentialsConfig{Kubeconfig: apiServer(t, mux), Version: "test"}, nil))
	ctx := context.Background()
	u, ok, err := r.ReviewToken(ctx, "good")
	if err != nil || !ok || u.Username != "alice" || len(u.Groups) != 1 {
		t.Errorf("good token: %+v %v %v", u, ok, err)
	}
	if _, ok, err := r.ReviewToken(ctx, "bad"); ok || err != nil {
		t.Errorf("bad token: %v %v, want refused without error", ok, err)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "stats", Name: "n"}}
	if ok, _, err := r.ReviewAccess(ctx, spec); !ok || err != nil {
		t.Errorf("alice nodes/stats: %v %v", ok, err)
	}
	spec.ResourceAttributes.Subresource = "log"
	if ok, reason, err := r.ReviewAccess(ctx, spec); ok || err != nil || reason == "" {
		t.Errorf("alice nodes/log: %v %q %v", ok, reason, err)
	}
	// An API server that fails is an error, not a refusal: not cached.
	down := NewReviewer(NewCredentials(CredentialsConfig{Kubeconfig: apiServer(t, http.NotFoundHandler()), Version: "test"}, nil))
	if _, _, err := down.ReviewToken(ctx, "good"); err == nil {
		t.Error("no error from an API server without the TokenReview API")
	}
}
