package mirror

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// api is what the mirror client asks of the API server. Its methods are
// those of client-go's typed clients (a fake clientset's satisfy it in the
// tests), but it is served by restAPI: client-go's typed clientset imports
// every API group, whose scheme registration ran before main in every
// process this binary is (the daemon, each container's monitor roles and
// its init) and was a third of the binary (docs/benchmarks.md).
type api interface {
	Pods(namespace string) podsAPI
	Nodes() nodesAPI
	Leases(namespace string) leasesAPI
	// EventSink posts events; every post ends with ctx.
	EventSink(ctx context.Context) record.EventSink
	CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
	CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

type podsAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

type nodesAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Create(ctx context.Context, node *v1.Node, opts metav1.CreateOptions) (*v1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

type leasesAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// clientScheme holds the groups the node's clients use: the mirror
// client's four and the certificate manager's CSRs; made at first use, not
// in a package init that every re-exec would pay.
var clientScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, coordinationv1.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme, certificatesv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the groups' own registration: a programming error
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
})

// restAPI is api on client-go's REST client, one per group.
type restAPI struct {
	core, coordination, authentication, authorization rest.Interface
	params                                            runtime.ParameterCodec
}

// groupClient is the REST client of one group of cfg, as the group's typed
// client's NewForConfig makes it, answers bounded (boundResponses).
func groupClient(cfg *rest.Config, gv schema.GroupVersion, path string) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &gv, path
	c.NegotiatedSerializer = serializer.NewCodecFactory(clientScheme()).WithoutConversion()
	c.Wrap(boundResponses)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// newRESTAPI makes the clients of cfg, as kubernetes.NewForConfig would
// for these groups.
func newRESTAPI(cfg *rest.Config) (*restAPI, error) {
	var a restAPI
	var err error
	for _, g := range []struct {
		dst  *rest.Interface
		gv   schema.GroupVersion
		path string
	}{
		{&a.core, v1.SchemeGroupVersion, "/api"},
		{&a.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
		{&a.authentication, authenticationv1.SchemeGroupVersion, "/apis"},
		{&a.authorization, authorizationv1.SchemeGroupVersion, "/apis"},
	} {
		if *g.dst, err = groupClient(cfg, g.gv, g.path); err != nil {
			return nil, fmt.Errorf("client of %s: %w", g.gv, err)
		}
	}
	a.params = runtime.NewParameterCodec(clientScheme())
	return &a, nil
}

func (a *restAPI) Pods(ns string) podsAPI {
	return restPods{typed[v1.Pod]{a.core, a.params, ns, "pods"}}
}

func (a *restAPI) Nodes() nodesAPI { return restNodes{typed[v1.Node]{a.core, a.params, "", "nodes"}} }

func (a *restAPI) Leases(ns string) leasesAPI {
	return typed[coordinationv1.Lease]{a.coordination, a.params, ns, "leases"}
}

func (a *restAPI) EventSink(ctx context.Context) record.EventSink { return eventSink{a.core, ctx} }

func (a *restAPI) CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	return typed[authenticationv1.TokenReview]{a.authentication, a.params, "", "tokenreviews"}.Create(ctx, tr, opts)
}

func (a *restAPI) CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	return typed[authorizationv1.SubjectAccessReview]{a.authorization, a.params, "", "subjectaccessreviews"}.Create(ctx, sar, opts)
}

// typed is one resource of a group, in a namespace ("" for cluster-scoped
// ones and for all namespaces), with the typed clients' requests
// (k8s.io/client-go/gentype).
type typed[T any] struct {
	c        rest.Interface
	params   runtime.ParameterCodec
	ns, name string // name: the resource's
}

func (r typed[T]) scoped(req *rest.Request) *rest.Request {
	return req.NamespaceIfScoped(r.ns, r.ns != "").Resource(r.name)
}

func (r typed[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	return intoAny[T](r.scoped(r.c.Get()).Name(name).VersionedParams(&opts, r.params).Do(ctx))
}

func (r typed[T]) Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error) {
	return intoAny[T](r.scoped(r.c.Post()).VersionedParams(&opts, r.params).Body(anyObject(obj)).Do(ctx))
}

func (r typed[T]) Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error) {
	o := anyObject(obj)
	return intoAny[T](r.scoped(r.c.Put()).Name(o.(interface{ GetName() string }).GetName()).VersionedParams(&opts, r.params).Body(o).Do(ctx))
}

func (r typed[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.scoped(r.c.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (r typed[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*T, error) {
	return intoAny[T](r.scoped(r.c.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, r.params).Body(data).Do(ctx))
}

// anyObject is obj as the runtime.Object every API type is.
func anyObject[T any](obj *T) runtime.Object { return any(obj).(runtime.Object) }

// intoAny decodes res into a new T.
func intoAny[T any](res rest.Result) (*T, error) {
	out := new(T)
	if err := res.Into(anyObject(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// listed is a resource with its list (L) and its watch.
type listed[T, L any] struct{ typed[T] }

// restPods, restNodes and restCSRs are the resources listed and watched.
type (
	restPods  = listed[v1.Pod, v1.PodList]
	restNodes = listed[v1.Node, v1.NodeList]
	restCSRs  = listed[certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequestList]
)

func (r listed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (*L, error) {
	return intoAny[L](r.scoped(r.c.Get()).VersionedParams(&opts, r.params).Timeout(listTimeout(opts)).Do(ctx))
}

func (r listed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.scoped(r.c.Get()).VersionedParams(&opts, r.params).Timeout(listTimeout(opts)).Watch(ctx)
}

// listTimeout is the request timeout a list or watch asks for, as the typed
// clients set it.
func listTimeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// eventSink posts events into their own namespace, as client-go's
// EventSinkImpl does, each post ending with ctx: an API server that does not
// answer holds no stop of the mirror's for its request timeout.
type eventSink struct {
	c   rest.Interface
	ctx context.Context
}

func (s eventSink) Create(ev *v1.Event) (*v1.Event, error) {
	return intoAny[v1.Event](s.c.Post().NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").Body(ev).Do(s.ctx))
}

func (s eventSink) Update(ev *v1.Event) (*v1.Event, error) {
	return intoAny[v1.Event](s.c.Put().NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").Name(ev.Name).Body(ev).Do(s.ctx))
}

func (s eventSink) Patch(ev *v1.Event, data []byte) (*v1.Event, error) {
	return intoAny[v1.Event](s.c.Patch(types.StrategicMergePatchType).NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").Name(ev.Name).Body(data).Do(s.ctx))
}
