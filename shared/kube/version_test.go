package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

func TestMinorVersion(t *testing.T) {
	for _, c := range []struct {
		info version.Info
		want string
	}{
		{version.Info{GitVersion: "v1.37.2", Major: "1", Minor: "37"}, "1.37"},
		{version.Info{GitVersion: "v1.30.4-eks-a737599", Major: "1", Minor: "30+"}, "1.30"},
		{version.Info{GitVersion: "v0.0.0-master+$Format:%H$", Major: "1", Minor: "29+"}, "1.29"},
		{version.Info{Major: "1", Minor: "31+"}, "1.31"},
	} {
		if got, err := MinorVersion(c.info); err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.info, got, err, c.want)
		}
	}
	for _, info := range []version.Info{{GitVersion: "unknown"}, {GitVersion: "v0.0.0-master+$Format:%H$"}} {
		if _, err := MinorVersion(info); err == nil || !strings.Contains(err.Error(), "gitVersion "+`"`+info.GitVersion) {
			t.Errorf("%+v: error %v, want one naming the document's fields", info, err)
		}
	}
}

// TestServerVersion reads /version with the configuration's credentials and
// names the server in every failure.
func TestServerVersion(t *testing.T) {
	status, body := http.StatusOK, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if v, err := ServerVersion(context.Background(), cfg); err != nil || v != "1.37" {
		t.Fatalf("version %q, %v", v, err)
	}
	status, body = http.StatusForbidden, "forbidden"
	if _, err := ServerVersion(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("403: %v", err)
	}
	status, body = http.StatusOK, "<html>"
	if _, err := ServerVersion(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "not a version document") {
		t.Errorf("not JSON: %v", err)
	}
}
