package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// etcdStore writes objects straight into the API server's storage, as the API
// server itself would store them: built-in types as protobuf ("k8s\x00" and a
// runtime.Unknown envelope, the default --storage-media-type) under
// /registry/<resource>/..., custom resources as JSON. Creating 120,000 objects
// through the API server took minutes of admission, validation and one etcd
// round trip each on the shared machine; etcd's v3 JSON gateway takes them 128 to
// a transaction (--max-txn-ops). Only the benchmark's population uses it: every
// read the invocations make still goes through the API server, which lists etcd
// to build its caches as it does after any restart.
type etcdStore struct {
	url   string
	http  *http.Client
	proto runtime.Encoder
}

func newEtcdStore(url string) (*etcdStore, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		return nil, fmt.Errorf("no protobuf serializer in client-go's scheme")
	}
	return &etcdStore{url: strings.TrimSuffix(url, "/"), http: &http.Client{Timeout: time.Minute},
		proto: scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)}, nil
}

// etcdKV is one key and its stored bytes.
type etcdKV struct {
	key   string
	value []byte
}

// podKV and nodeKV encode core objects as the API server stores them.
func (s *etcdStore) podKV(p *corev1.Pod) (etcdKV, error) {
	var b bytes.Buffer
	if err := s.proto.Encode(p, &b); err != nil {
		return etcdKV{}, fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return etcdKV{key: "/registry/pods/" + p.Namespace + "/" + p.Name, value: b.Bytes()}, nil
}

func (s *etcdStore) nodeKV(n *corev1.Node) (etcdKV, error) {
	var b bytes.Buffer
	if err := s.proto.Encode(n, &b); err != nil {
		return etcdKV{}, fmt.Errorf("encode node %s: %w", n.Name, err)
	}
	return etcdKV{key: "/registry/minions/" + n.Name, value: b.Bytes()}, nil
}

// nodeClaimKV encodes a NodeClaim as its CRD's storage does (JSON).
func nodeClaimKV(u *unstructured.Unstructured) (etcdKV, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return etcdKV{}, fmt.Errorf("encode nodeclaim %s: %w", u.GetName(), err)
	}
	return etcdKV{key: "/registry/karpenter.sh/nodeclaims/" + u.GetName(), value: b}, nil
}

// put writes kvs in one transaction.
func (s *etcdStore) put(ctx context.Context, kvs []etcdKV) error {
	type put struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	ops := make([]map[string]put, len(kvs))
	for i, kv := range kvs {
		ops[i] = map[string]put{"requestPut": {Key: base64.StdEncoding.EncodeToString([]byte(kv.key)), Value: base64.StdEncoding.EncodeToString(kv.value)}}
	}
	body, err := json.Marshal(map[string]any{"success": ops})
	if err != nil {
		return err
	}
	_, err = s.call(ctx, "/v3/kv/txn", body)
	return err
}

// count is how many keys start with prefix.
func (s *etcdStore) count(ctx context.Context, prefix string) (int, error) {
	end := []byte(prefix)
	end[len(end)-1]++
	body, _ := json.Marshal(map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end), "count_only": true})
	raw, err := s.call(ctx, "/v3/kv/range", body)
	if err != nil {
		return 0, err
	}
	var out struct {
		Count string `json:"count"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("etcd range answer %q: %w", raw, err)
	}
	n := 0
	if out.Count != "" {
		if _, err := fmt.Sscan(out.Count, &n); err != nil {
			return 0, fmt.Errorf("etcd range count %q: %w", out.Count, err)
		}
	}
	return n, nil
}

func (s *etcdStore) call(ctx context.Context, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd %s: %s: %s", path, resp.Status, raw)
	}
	return raw, nil
}

// etcdBatcher collects kvs and writes them in transactions of etcdTxnOps from a
// few parallel writers.
type etcdBatcher struct {
	store   *etcdStore
	ctx     context.Context
	work    chan []etcdKV
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	pending []etcdKV
	written int
}

// etcdTxnOps is etcd's default --max-txn-ops.
const etcdTxnOps = 128

func newEtcdBatcher(ctx context.Context, store *etcdStore, writers int) *etcdBatcher {
	b := &etcdBatcher{store: store, ctx: ctx, work: make(chan []etcdKV, writers)}
	for i := 0; i < writers; i++ {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for kvs := range b.work {
				if b.failed() {
					continue
				}
				if err := store.put(ctx, kvs); err != nil {
					b.fail(err)
					continue
				}
				b.mu.Lock()
				b.written += len(kvs)
				b.mu.Unlock()
			}
		}()
	}
	return b
}

func (b *etcdBatcher) failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err != nil
}

func (b *etcdBatcher) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

// add queues one object (or records the error that kept it from being encoded).
func (b *etcdBatcher) add(kv etcdKV, err error) {
	if err != nil {
		b.fail(err)
		return
	}
	b.pending = append(b.pending, kv)
	if len(b.pending) == etcdTxnOps {
		b.work <- b.pending
		b.pending = nil
	}
}

// close writes what is left, waits for the writers and returns the first error
// and how many objects were written.
func (b *etcdBatcher) close() (int, error) {
	if len(b.pending) > 0 {
		b.work <- b.pending
		b.pending = nil
	}
	close(b.work)
	b.wg.Wait()
	return b.written, b.err
}

// stored fills in what the API server sets on create (uid, creationTimestamp,
// generation), since nothing on this path does.
func stored(m *metav1.ObjectMeta, kind string, i int, created time.Time) {
	m.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", kindNumber(kind), i))
	m.CreationTimestamp = metav1.NewTime(created)
	if kind == "NodeClaim" {
		m.Generation = 1
	}
}

func kindNumber(kind string) int {
	switch kind {
	case "Node":
		return 1
	case "NodeClaim":
		return 2
	case "DaemonSetPod":
		return 3
	case "AppPod":
		return 4
	default:
		return 5
	}
}

// defaultPodSpec sets what the API server's defaulting and admission add to every
// pod (DefaultTolerationSeconds, the default scheduler, ...), so the stored pods
// are as large as real ones.
func defaultPodSpec(spec *corev1.PodSpec) {
	spec.RestartPolicy = corev1.RestartPolicyAlways
	spec.DNSPolicy = corev1.DNSClusterFirst
	spec.SchedulerName = corev1.DefaultSchedulerName
	spec.SecurityContext = &corev1.PodSecurityContext{}
	spec.EnableServiceLinks = ptrTo(true)
	spec.PreemptionPolicy = ptrTo(corev1.PreemptLowerPriority)
	spec.Priority = ptrTo(int32(0))
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	spec.Tolerations = append(spec.Tolerations,
		corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(300))},
		corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(300))})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if p := c.ReadinessProbe; p != nil {
			p.TimeoutSeconds, p.SuccessThreshold, p.FailureThreshold = 1, 1, 3
			if p.HTTPGet != nil {
				p.HTTPGet.Scheme = corev1.URISchemeHTTP
			}
		}
	}
	for i := range spec.Volumes {
		if pr := spec.Volumes[i].Projected; pr != nil {
			pr.DefaultMode = ptrTo(int32(0o644))
		}
	}
}

// runningStatus is what the kubelet reports for a pod that has started.
func runningStatus(p *corev1.Pod, node int, since time.Time) {
	t := metav1.NewTime(since)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, StartTime: &t,
		HostIP: fmt.Sprintf("10.%d.%d.%d", node/65536, (node/256)%256, node%256), PodIP: fmt.Sprintf("100.%d.%d.%d", node/65536, (node/256)%256, node%256),
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptrTo(true), Image: p.Spec.Containers[0].Image,
			ImageID:     p.Spec.Containers[0].Image + "@sha256:4f5a0c1b2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a",
			ContainerID: fmt.Sprintf("containerd://%064x", uint64(node)<<20|uint64(len(p.Name))),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}}},
	}
}
