package mirror

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// fakeAPI is api on a clientset, a fake one in these tests (its typed
// clients have api's methods and more).
type fakeAPI struct{ cs kubernetes.Interface }

func (f fakeAPI) Pods(ns string) podsAPI { return f.cs.CoreV1().Pods(ns) }
func (f fakeAPI) Nodes() nodesAPI        { return f.cs.CoreV1().Nodes() }
func (f fakeAPI) Leases(ns string) leasesAPI {
	return f.cs.CoordinationV1().Leases(ns)
}
func (f fakeAPI) EventSink(context.Context) record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: f.cs.CoreV1().Events("")}
}
func (f fakeAPI) CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	return f.cs.AuthenticationV1().TokenReviews().Create(ctx, tr, opts)
}
func (f fakeAPI) CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	return f.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, opts)
}
