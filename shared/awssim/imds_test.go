package awssim

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func imdsWorld(t *testing.T, tokens string) (*Sim, *FakeClock, *httptest.Server, *IMDS) {
	t.Helper()
	clock := NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	in := Instance{ID: "i-0123456789abcdef0", InstanceType: "m6i.large", Zone: "us-east-1b", PrivateIP: "10.0.1.17",
		CapacityType: CapacitySpot, ImageID: "ami-0c0ffee00000000a1", IAMInstanceProfile: "KarpenterNodeRole-demo",
		UserData:        base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\necho hi\n")),
		MetadataOptions: &MetadataOptions{HTTPTokens: tokens, HTTPPutResponseHopLimit: 1}}
	if err := s.Apply(Seed{Instances: []Instance{in}}); err != nil {
		t.Fatal(err)
	}
	m := s.IMDS(in.ID)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return s, clock, srv, m
}

func imdsDo(t *testing.T, srv *httptest.Server, method, path string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestIMDSv2Required follows EC2's documented IMDSv2 behaviour
// (docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-metadata-v2-how-it-works.html):
// a PUT for a session token with a TTL of 1 to 21600 seconds, 401 for
// metadata reads without a token when httpTokens is required, and for any
// invalid or expired token.
func TestIMDSv2Required(t *testing.T) {
	_, clock, srv, m := imdsWorld(t, "required")
	if code, body := imdsDo(t, srv, "GET", "/latest/meta-data/instance-id", nil); code != 401 || body != "" {
		t.Errorf("no token, httpTokens required: %d %q, want 401 and no body", code, body)
	}
	code, tok := imdsDo(t, srv, "PUT", "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "60"})
	if code != 200 || len(tok) < 40 {
		t.Fatalf("token: %d %q", code, tok)
	}
	with := map[string]string{IMDSTokenHeader: tok}
	for path, want := range map[string]string{
		"/latest/meta-data/instance-id":                 "i-0123456789abcdef0",
		"/latest/meta-data/placement/availability-zone": "us-east-1b",
		"/latest/meta-data/placement/region":            "us-east-1",
		"/latest/meta-data/local-hostname":              "ip-10-0-1-17.ec2.internal",
		"/latest/meta-data/instance-life-cycle":         "spot",
		"/latest/user-data":                             "#!/bin/bash\necho hi\n",
	} {
		if code, body := imdsDo(t, srv, "GET", path, with); code != 200 || body != want {
			t.Errorf("%s: %d %q, want %q", path, code, body, want)
		}
	}
	if _, body := imdsDo(t, srv, "GET", "/latest/meta-data/placement/", with); body != "availability-zone\nregion" {
		t.Errorf("directory listing %q", body)
	}
	_, doc := imdsDo(t, srv, "GET", "/latest/dynamic/instance-identity/document", with)
	var id struct{ InstanceID, Region, AvailabilityZone string }
	if err := json.Unmarshal([]byte(doc), &id); err != nil || id.InstanceID != "i-0123456789abcdef0" || id.Region != "us-east-1" || id.AvailabilityZone != "us-east-1b" {
		t.Errorf("identity document %s (%v)", doc, err)
	}
	for _, tc := range []struct {
		method, path string
		header       map[string]string
		want         int
	}{
		{"PUT", "/latest/api/token", nil, 400},
		{"PUT", "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "0"}, 400},
		{"PUT", "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "21601"}, 400},
		{"GET", "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "60"}, 405},
		{"PUT", "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "60", "X-Forwarded-For": "10.0.0.1"}, 403},
		{"GET", "/latest/meta-data/instance-id", map[string]string{IMDSTokenHeader: "AQAEAnot-a-token"}, 401},
		{"GET", "/latest/meta-data/no-such-thing", with, 404},
	} {
		if code, _ := imdsDo(t, srv, tc.method, tc.path, tc.header); code != tc.want {
			t.Errorf("%s %s %v: %d, want %d", tc.method, tc.path, tc.header, code, tc.want)
		}
	}
	clock.Advance(61 * time.Second)
	if code, _ := imdsDo(t, srv, "GET", "/latest/meta-data/instance-id", with); code != 401 {
		t.Errorf("expired token: %d, want 401", code)
	}
	reqs := m.Requests()
	if len(reqs) == 0 || reqs[0].Path != "/latest/meta-data/instance-id" || reqs[0].Token || reqs[0].Status != 401 {
		t.Errorf("recorded requests %+v", reqs)
	}
}

func TestIMDSv1WhenOptional(t *testing.T) {
	s, _, srv, _ := imdsWorld(t, "optional")
	if code, body := imdsDo(t, srv, "GET", "/latest/meta-data/instance-id", nil); code != 200 || body != "i-0123456789abcdef0" {
		t.Errorf("httpTokens optional, no token: %d %q", code, body)
	}
	// A token that is not valid is refused even when tokens are optional.
	if code, _ := imdsDo(t, srv, "GET", "/latest/meta-data/instance-id", map[string]string{IMDSTokenHeader: "bogus"}); code != 401 {
		t.Errorf("bad token, httpTokens optional: %d, want 401", code)
	}
	in, _ := s.Instance("i-0123456789abcdef0")
	in.State = StateTerminated
	if err := s.Apply(Seed{Instances: []Instance{in}}); err != nil {
		t.Fatal(err)
	}
	if code, _ := imdsDo(t, srv, "GET", "/latest/meta-data/instance-id", nil); code != 503 {
		t.Errorf("terminated instance: %d, want 503", code)
	}
}

func TestIMDSDisabled(t *testing.T) {
	s, _, _, _ := imdsWorld(t, "optional")
	in := Instance{ID: "i-0fedcba9876543210", InstanceType: "m6i.large", Zone: "us-east-1a", PrivateIP: "10.0.0.9",
		MetadataOptions: &MetadataOptions{HTTPEndpoint: "disabled"}}
	if err := s.Apply(Seed{Instances: []Instance{in}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.IMDS(in.ID))
	defer srv.Close()
	for _, p := range []string{"/latest/api/token", "/latest/meta-data/instance-id"} {
		method := map[bool]string{true: "PUT", false: "GET"}[strings.HasSuffix(p, "token")]
		if code, _ := imdsDo(t, srv, method, p, map[string]string{IMDSTokenTTLHeader: "60"}); code != 403 {
			t.Errorf("httpEndpoint disabled, %s %s: %d, want 403", method, p, code)
		}
	}
}
