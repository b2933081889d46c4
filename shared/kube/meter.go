package kube

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Meter counts the API requests one client makes, by verb and resource, and the
// response bytes it reads: what an invocation costs the API server, which the scale
// benchmark reports and an operator can compare with a watch-based controller's.
type Meter struct {
	mu     sync.Mutex
	counts map[string]int
	bytes  atomic.Int64
}

// NewMeter returns an empty Meter.
func NewMeter() *Meter { return &Meter{counts: map[string]int{}} }

// Wrap is a rest.Config WrapTransport: every request through rt is counted.
func (m *Meter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return meteredTransport{m: m, rt: rt}
}

// Counts returns the requests so far, keyed "VERB resource" (LIST pods, PATCH
// nodeclaims, ...).
func (m *Meter) Counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.counts))
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

// Total is the number of requests so far.
func (m *Meter) Total() int {
	n := 0
	for _, v := range m.Counts() {
		n += v
	}
	return n
}

// BytesRead is the response body bytes read so far (as sent, before any decoding).
func (m *Meter) BytesRead() int64 { return m.bytes.Load() }

// String lists the counts sorted by key: "GET leases=1 LIST pods=101 ...".
func (m *Meter) String() string {
	c := m.Counts()
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}

type meteredTransport struct {
	m  *Meter
	rt http.RoundTripper
}

func (t meteredTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	key := RequestKey(r.Method, r.URL.Path, r.URL.Query().Get("watch") == "true")
	t.m.mu.Lock()
	t.m.counts[key]++
	t.m.mu.Unlock()
	resp, err := t.rt.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.m.bytes}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// RequestKey names an API request as "VERB resource[/subresource]" in the API
// server's own terms (a GET without a name is a LIST, or a WATCH): /api/v1/pods,
// /api/v1/namespaces/ns/pods/p/eviction and /apis/karpenter.sh/v1/nodeclaims/x map
// to "LIST pods", "POST pods/eviction" and "GET nodeclaims".
func RequestKey(method, path string, watch bool) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return method + " " + path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // a namespaced resource (a namespace itself is 2 parts)
	}
	if len(parts) == 0 {
		return method + " " + path
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb := method
	switch {
	case method == http.MethodGet && watch:
		verb = "WATCH"
	case method == http.MethodGet && !named:
		verb = "LIST"
	}
	return verb + " " + resource
}
