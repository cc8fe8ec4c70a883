package mirror

import (
	"context"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reviewer asks the API server who a bearer token is (TokenReview) and
// what a user may do (SubjectAccessReview), for the node API's webhook
// authentication and authorization, as the kubelet's delegating
// authenticator and authorizer do with its kubeconfig.
type Reviewer struct {
	creds *Credentials

	mu  sync.Mutex // guards cli
	cli api
}

// NewReviewer returns a reviewer that makes its client of creds when first
// asked, and again after a failure to: kubeadm may write the kubeconfig
// after staticpodd started.
func NewReviewer(creds *Credentials) *Reviewer {
	return &Reviewer{creds: creds}
}

func (r *Reviewer) client() (api, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cli != nil {
		return r.cli, nil
	}
	rc, err := r.creds.RESTConfig()
	if err != nil {
		return nil, err
	}
	rc.Timeout = requestTimeout
	cli, err := newRESTAPI(rc)
	if err != nil {
		return nil, err
	}
	r.cli = cli
	return cli, nil
}

// ReviewToken sends a TokenReview. ok is the API server's authenticated.
func (r *Reviewer) ReviewToken(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	cli, err := r.client()
	if err != nil {
		return authenticationv1.UserInfo{}, false, err
	}
	tr, err := cli.CreateTokenReview(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("token review: %w", err)
	}
	if tr.Status.Error != "" && !tr.Status.Authenticated {
		return authenticationv1.UserInfo{}, false, nil
	}
	return tr.Status.User, tr.Status.Authenticated, nil
}

// ReviewAccess sends a SubjectAccessReview; a denial's reason comes back.
func (r *Reviewer) ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, string, error) {
	cli, err := r.client()
	if err != nil {
		return false, "", err
	}
	sar, err := cli.CreateSubjectAccessReview(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, sar.Status.Reason, nil
}
