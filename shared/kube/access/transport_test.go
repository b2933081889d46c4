package access

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestEKSTokenSentOverVerifiedTLS checks the whole eks rest.Config: the CA from the
// configuration verifies the server, and every request carries a k8s-aws-v1 token.
func TestEKSTokenSentOverVerifiedTLS(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	c := Config{Mode: ModeEKS, ClusterName: "c1", Region: "us-east-1", Endpoint: srv.URL, CAData: ca}
	cfg, err := RESTConfig(context.Background(), c, Deps{AWS: testAWS, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		resp, err := hc.Get(srv.URL + "/version")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "Bearer "+TokenPrefix) || got[0] != got[1] {
		t.Fatalf("Authorization headers %q: want the same cached k8s-aws-v1 bearer token twice", got)
	}
	// A CA that did not sign the server's certificate must fail the handshake.
	c.CAData = otherCA(t)
	c2 := c
	c2.ClusterName = "c2"
	cfg, err = RESTConfig(context.Background(), c2, Deps{AWS: testAWS})
	if err != nil {
		t.Fatal(err)
	}
	hc, _ = rest.HTTPClientFor(cfg)
	if _, err := hc.Get(srv.URL + "/version"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("want a TLS verification failure with the wrong CA, got %v", err)
	}
}

// otherCA is a self-signed CA that signed nothing the test server presents.
func otherCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
