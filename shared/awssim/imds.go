package awssim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Instance metadata service (IMDS) headers, as EC2 names them.
const (
	IMDSTokenHeader    = "X-aws-ec2-metadata-token"
	IMDSTokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
)

// IMDSRequest is one request an instance made to its metadata service.
type IMDSRequest struct {
	Method, Path string
	// Token says whether the request carried a session token header.
	Token bool
	// Status is the HTTP status answered.
	Status int
}

// IMDS is the instance metadata service of one instance: what
// http://169.254.169.254 answers from inside it, IMDSv2 included.
//
//   - PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds (1 to
//     21600) returns a session token; without the header 400, with an
//     X-Forwarded-For header 403 (EC2 refuses tokens to proxied requests), with
//     GET 405.
//   - GET /latest/meta-data/..., /latest/dynamic/instance-identity/document and
//     /latest/user-data answer with a valid X-aws-ec2-metadata-token; without
//     one they answer only when the instance's metadataOptions.httpTokens is
//     optional, and 401 with an empty body when it is required (EC2's default
//     for EC2NodeClasses). A token that is unknown or expired is 401 either way.
//   - httpEndpoint disabled answers 403 to everything.
//
// Values come from the instance as the simulator holds it at request time, so
// a terminated instance's metadata service answers 503. Every request is
// recorded (Requests). Safe for concurrent use.
type IMDS struct {
	s  *Sim
	id string

	mu       sync.Mutex
	tokens   map[string]time.Time // token → expiry (simulated time)
	issued   uint64
	requests []IMDSRequest
}

// IMDS returns the metadata service of an instance; serve it on loopback and
// point the instance's clients at it.
func (s *Sim) IMDS(instanceID string) *IMDS {
	return &IMDS{s: s, id: instanceID, tokens: map[string]time.Time{}}
}

// Requests returns the requests served so far, in order.
func (m *IMDS) Requests() []IMDSRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// maxIMDSTokenTTL is the longest session EC2 grants (six hours).
const maxIMDSTokenTTL = 21600

func (m *IMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := m.serve(w, r)
	m.mu.Lock()
	m.requests = append(m.requests, IMDSRequest{Method: r.Method, Path: r.URL.Path, Token: r.Header.Get(IMDSTokenHeader) != "", Status: status})
	m.mu.Unlock()
}

func (m *IMDS) serve(w http.ResponseWriter, r *http.Request) int {
	in, ok := m.s.Instance(m.id)
	if !ok || in.State != StateRunning {
		return answer(w, http.StatusServiceUnavailable, "")
	}
	opts := effectiveMetadataOptions(in)
	if opts.HTTPEndpoint == "disabled" {
		return answer(w, http.StatusForbidden, "")
	}
	now := m.s.clock.Now()
	if r.URL.Path == "/latest/api/token" {
		switch {
		case r.Method != http.MethodPut:
			return answer(w, http.StatusMethodNotAllowed, "")
		case r.Header.Get("X-Forwarded-For") != "":
			return answer(w, http.StatusForbidden, "")
		}
		ttl, err := strconv.Atoi(strings.TrimSpace(r.Header.Get(IMDSTokenTTLHeader)))
		if err != nil || ttl < 1 || ttl > maxIMDSTokenTTL {
			return answer(w, http.StatusBadRequest, "")
		}
		w.Header().Set(IMDSTokenTTLHeader, strconv.Itoa(ttl))
		return answer(w, http.StatusOK, m.issue(now, time.Duration(ttl)*time.Second))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return answer(w, http.StatusMethodNotAllowed, "")
	}
	if tok := r.Header.Get(IMDSTokenHeader); tok != "" {
		m.mu.Lock()
		exp, known := m.tokens[tok]
		m.mu.Unlock()
		if !known || !now.Before(exp) {
			return answer(w, http.StatusUnauthorized, "")
		}
	} else if opts.HTTPTokens != "optional" {
		return answer(w, http.StatusUnauthorized, "")
	}
	body, found := m.s.metadata(in, opts, r.URL.Path)
	if !found {
		return answer(w, http.StatusNotFound, "")
	}
	return answer(w, http.StatusOK, body)
}

func answer(w http.ResponseWriter, status int, body string) int {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
	return status
}

// issue makes a session token: opaque, deterministic for a simulator seed, and
// unguessable from the instance ID alone.
func (m *IMDS) issue(now time.Time, ttl time.Duration) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.issued++
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], m.s.cfg.RandSeed)
	binary.BigEndian.PutUint64(b[8:], m.issued)
	sum := sha256.Sum256(append(b[:], m.id...))
	tok := base64.StdEncoding.EncodeToString(append([]byte{1, 0, 4, 0}, sum[:36-4]...))
	m.tokens[tok] = now.Add(ttl)
	return tok
}

// effectiveMetadataOptions are an instance's metadata options with EC2's
// defaults for those its launch did not set.
func effectiveMetadataOptions(in Instance) MetadataOptions {
	m := MetadataOptions{HTTPTokens: "optional", HTTPEndpoint: "enabled", HTTPPutResponseHopLimit: 1, HTTPProtocolIPv6: "disabled", InstanceMetadataTags: "disabled"}
	if o := in.MetadataOptions; o != nil {
		m.HTTPTokens = cmpOr(o.HTTPTokens, m.HTTPTokens)
		m.HTTPEndpoint = cmpOr(o.HTTPEndpoint, m.HTTPEndpoint)
		if o.HTTPPutResponseHopLimit > 0 {
			m.HTTPPutResponseHopLimit = o.HTTPPutResponseHopLimit
		}
		m.HTTPProtocolIPv6 = cmpOr(o.HTTPProtocolIPv6, m.HTTPProtocolIPv6)
		m.InstanceMetadataTags = cmpOr(o.InstanceMetadataTags, m.InstanceMetadataTags)
	}
	return m
}

// metadata answers one metadata path for an instance: a leaf's value, or a
// directory's entries one per line (sub-directories with a trailing slash), as
// IMDS lists them.
func (s *Sim) metadata(in Instance, opts MetadataOptions, path string) (string, bool) {
	s.mu.Lock()
	account, region := s.w.account, s.w.region
	s.mu.Unlock()
	switch path {
	case "/latest/user-data":
		if in.UserData == "" {
			return "", false
		}
		raw, err := base64.StdEncoding.DecodeString(in.UserData)
		if err != nil {
			return "", false
		}
		return string(raw), true
	case "/latest/dynamic/instance-identity/document":
		doc, _ := json.MarshalIndent(map[string]any{
			"accountId": account, "architecture": cmpOr(in.Architecture, "x86_64"), "availabilityZone": in.Zone,
			"imageId": in.ImageID, "instanceId": in.ID, "instanceType": in.InstanceType,
			"pendingTime": in.LaunchTime.UTC().Format(time.RFC3339), "privateIp": in.PrivateIP,
			"region": region, "version": "2017-09-30",
		}, "", "  ")
		return string(doc), true
	}
	rest, ok := strings.CutPrefix(path, "/latest/meta-data")
	if !ok {
		return "", false
	}
	lifecycle := "on-demand"
	if in.CapacityType == CapacitySpot {
		lifecycle = "spot"
	}
	h := sha256.Sum256([]byte(in.ID))
	mac := fmt.Sprintf("0e:%02x:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3], h[4])
	leaves := map[string]string{
		"ami-id": in.ImageID, "hostname": in.PrivateDNSName, "instance-id": in.ID, "instance-type": in.InstanceType,
		"instance-life-cycle": lifecycle, "local-hostname": in.PrivateDNSName, "local-ipv4": in.PrivateIP, "mac": mac,
		"placement/availability-zone": in.Zone, "placement/region": region,
		"services/domain": "amazonaws.com", "services/partition": "aws",
	}
	if in.IAMInstanceProfile != "" {
		arn := in.IAMInstanceProfile
		if !strings.HasPrefix(arn, "arn:") {
			arn = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", account, arn)
		}
		info, _ := json.Marshal(map[string]string{"Code": "Success", "InstanceProfileArn": arn})
		leaves["iam/info"] = string(info)
	}
	if opts.InstanceMetadataTags == "enabled" {
		for k, v := range in.Tags {
			leaves["tags/instance/"+k] = v
		}
	}
	key := strings.Trim(rest, "/")
	if v, ok := leaves[key]; ok && !strings.HasSuffix(rest, "/") {
		return v, true
	}
	// A directory lists its children.
	prefix := key + "/"
	if key == "" {
		prefix = ""
	}
	seen := map[string]bool{}
	var entries []string
	for leaf := range leaves {
		child, ok := strings.CutPrefix(leaf, prefix)
		if !ok {
			continue
		}
		if dir, _, nested := strings.Cut(child, "/"); nested {
			child = dir + "/"
		}
		if !seen[child] {
			seen[child] = true
			entries = append(entries, child)
		}
	}
	if len(entries) == 0 {
		return "", false
	}
	slices.Sort(entries)
	return strings.Join(entries, "\n"), true
}
