package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// scheme knows the five API groups Joiner calls (and StorageClasses) and nothing else, which is what keeps
// the other ~50 groups out of the Lambda binaries.
var (
	scheme         = newScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, coordinationv1.AddToScheme, eventsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // static registrations; only a programming error fails here
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	// Of storage.k8s.io only StorageClasses, which snapshots read.
	s.AddKnownTypes(storagev1.SchemeGroupVersion, &storagev1.StorageClass{}, &storagev1.StorageClassList{})
	metav1.AddToGroupVersion(s, storagev1.SchemeGroupVersion)
	return s
}

// NewClients builds the clients from one rest.Config. Built-in types travel as
// protobuf (several times cheaper to decode than JSON for a 50,000-pod list); the
// CRDs, which have no protobuf form, as JSON.
func NewClients(cfg *rest.Config) (*Clients, error) {
	pb := rest.CopyConfig(cfg)
	pb.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	pb.ContentType = runtime.ContentTypeProtobuf
	hc, err := rest.HTTPClientFor(pb)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	var rcs [6]*rest.RESTClient
	for i, gv := range []schema.GroupVersion{corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, policyv1.SchemeGroupVersion,
		coordinationv1.SchemeGroupVersion, eventsv1.SchemeGroupVersion, storagev1.SchemeGroupVersion} {
		if rcs[i], err = groupClient(pb, hc, gv); err != nil {
			return nil, fmt.Errorf("kubernetes %s client: %w", gv, err)
		}
	}
	// The dynamic client over a JSON REST client built here: dynamic.NewForConfig
	// would add its CBOR serializer (an alpha, off by default), 0.13 MB of binary.
	cj := rest.CopyConfig(cfg)
	cj.ContentType, cj.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cj.GroupVersion, cj.APIPath = nil, "/apis"
	cj.NegotiatedSerializer = codecs.WithoutConversion() // decodes the API server's Status errors
	if cj.UserAgent == "" {
		cj.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cj, hc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	dyn := dynamic.New(rc)
	return &Clients{
		Core:         restCore{rcs[0]},
		Apps:         restApps{rcs[1]},
		Policy:       restPolicy{rcs[2]},
		Coordination: restCoordination{rcs[3]},
		Events:       restEvents{rcs[4]},
		Dynamic:      dyn,
		Storage:      restStorage{core: rcs[0], storage: rcs[5]},
	}, nil
}

// groupClient is what client-go's generated NewForConfigAndClient does for one group,
// over Joiner's scheme.
func groupClient(cfg *rest.Config, hc *http.Client, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientForConfigAndClient(c, hc)
}

// restResource issues client-go's typed requests for one resource in one namespace
// ("" = cluster-scoped, or all namespaces for a list).
type restResource struct {
	rc        *rest.RESTClient
	namespace string
	name      string
}

func (r restResource) req(verb *rest.Request) *rest.Request {
	return verb.NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name)
}

func (r restResource) get(ctx context.Context, name string, opts metav1.GetOptions, out runtime.Object) error {
	return r.req(r.rc.Get()).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
}

func (r restResource) list(ctx context.Context, opts metav1.ListOptions, out runtime.Object) error {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return r.req(r.rc.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout).Do(ctx).Into(out)
}

func (r restResource) create(ctx context.Context, obj runtime.Object, opts metav1.CreateOptions, out runtime.Object) error {
	return r.req(r.rc.Post()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
}

func (r restResource) update(ctx context.Context, name string, obj runtime.Object, opts metav1.UpdateOptions, out runtime.Object) error {
	return r.req(r.rc.Put()).Name(name).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
}

func (r restResource) patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub []string, out runtime.Object) error {
	return r.req(r.rc.Patch(pt)).Name(name).SubResource(sub...).VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
}

func (r restResource) delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req(r.rc.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

type restCore struct{ rc *rest.RESTClient }

func (c restCore) Pods(ns string) PodAPI { return restPods{restResource{c.rc, ns, "pods"}} }
func (c restCore) Nodes() NodeAPI        { return restNodes{restResource{c.rc, "", "nodes"}} }

type restPods struct{ restResource }

func (p restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	return out, p.list(ctx, opts, out)
}

func (p restPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return p.delete(ctx, name, opts)
}

func (p restPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, p.patch(ctx, name, pt, data, opts, sub, out)
}

func (p restPods) EvictV1(ctx context.Context, ev *policyv1.Eviction) error {
	return p.req(p.rc.Post()).Name(ev.Name).SubResource("eviction").MaxRetries(0).Body(ev).Do(ctx).Error()
}

type restNodes struct{ restResource }

func (n restNodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	return out, n.list(ctx, opts, out)
}

func (n restNodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	out := &corev1.Node{}
	return out, n.get(ctx, name, opts, out)
}

func (n restNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	out := &corev1.Node{}
	return out, n.patch(ctx, name, pt, data, opts, sub, out)
}

func (n restNodes) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return n.delete(ctx, name, opts)
}

type restApps struct{ rc *rest.RESTClient }

func (a restApps) DaemonSets(ns string) DaemonSetAPI {
	return restDaemonSets{restResource{a.rc, ns, "daemonsets"}}
}

type restDaemonSets struct{ restResource }

func (d restDaemonSets) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.DaemonSetList, error) {
	out := &appsv1.DaemonSetList{}
	return out, d.list(ctx, opts, out)
}

type restPolicy struct{ rc *rest.RESTClient }

func (p restPolicy) PodDisruptionBudgets(ns string) PodDisruptionBudgetAPI {
	return restPDBs{restResource{p.rc, ns, "poddisruptionbudgets"}}
}

type restPDBs struct{ restResource }

func (p restPDBs) List(ctx context.Context, opts metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error) {
	out := &policyv1.PodDisruptionBudgetList{}
	return out, p.list(ctx, opts, out)
}

type restStorage struct{ core, storage *rest.RESTClient }

func (s restStorage) PersistentVolumeClaims(ns string) PersistentVolumeClaimAPI {
	return restClaims{restResource{s.core, ns, "persistentvolumeclaims"}}
}

func (s restStorage) PersistentVolumes() PersistentVolumeAPI {
	return restVolumes{restResource{s.core, "", "persistentvolumes"}}
}

func (s restStorage) StorageClasses() StorageClassAPI {
	return restClasses{restResource{s.storage, "", "storageclasses"}}
}

type restClaims struct{ restResource }

func (r restClaims) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
	out := &corev1.PersistentVolumeClaimList{}
	return out, r.list(ctx, opts, out)
}

type restVolumes struct{ restResource }

func (r restVolumes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeList, error) {
	out := &corev1.PersistentVolumeList{}
	return out, r.list(ctx, opts, out)
}

type restClasses struct{ restResource }

func (r restClasses) List(ctx context.Context, opts metav1.ListOptions) (*storagev1.StorageClassList, error) {
	out := &storagev1.StorageClassList{}
	return out, r.list(ctx, opts, out)
}

type restCoordination struct{ rc *rest.RESTClient }

func (c restCoordination) Leases(ns string) LeaseAPI {
	return restLeases{restResource{c.rc, ns, "leases"}}
}

type restLeases struct{ restResource }

func (l restLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.get(ctx, name, opts, out)
}

func (l restLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.create(ctx, lease, opts, out)
}

func (l restLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.update(ctx, lease.Name, lease, opts, out)
}

type restEvents struct{ rc *rest.RESTClient }

func (e restEvents) Events(ns string) EventAPI { return restEventAPI{restResource{e.rc, ns, "events"}} }

type restEventAPI struct{ restResource }

func (e restEventAPI) Create(ctx context.Context, ev *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	return out, e.create(ctx, ev, opts, out)
}

func (e restEventAPI) Get(ctx context.Context, name string, opts metav1.GetOptions) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	return out, e.get(ctx, name, opts, out)
}

func (e restEventAPI) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	return out, e.patch(ctx, name, pt, data, opts, sub, out)
}
