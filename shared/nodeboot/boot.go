package nodeboot

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
)

// boot runs one instance's user data: shell parts under bash, then the agent
// the user data configures (nodeadm for NodeConfig parts, Bottlerocket for TOML).
func boot(ctx context.Context, m *awssim.IMDS, in awssim.Instance, userData string, store func() map[string]string) Result {
	var (
		scripts     []script
		nodeConfigs bool
	)
	switch {
	case strings.TrimSpace(userData) == "":
		return Result{Err: fmt.Errorf("the instance has no user data: nothing joins it to the cluster")}
	case bootstrap.IsMIME(userData):
		parts, err := bootstrap.ParseMIME(userData)
		if err != nil {
			return Result{Err: fmt.Errorf("cloud-init cannot read the user data: %w", err)}
		}
		for i, p := range parts {
			switch p.ContentType() {
			case "text/x-shellscript", "text/cloud-boothook":
				scripts = append(scripts, script{name: fmt.Sprintf("part-%03d", i+1), body: p.Body})
			case bootstrap.ContentTypeNodeConfig:
				nodeConfigs = true
			}
		}
	case strings.HasPrefix(userData, "#!"):
		scripts = []script{{name: "user-data", body: userData}}
	case isBottlerocketTOML(userData):
		return bottlerocket(m, in)
	default:
		// A bare NodeConfig is nodeadm's; anything else cloud-init does not run.
		nodeConfigs = true
	}
	var r Result
	if len(scripts) > 0 {
		r = runScripts(ctx, m, store(), scripts)
		if r.Err != nil {
			return r
		}
	}
	if nodeConfigs {
		j, err := nodeadm(m, in)
		if err != nil {
			r.Err = err
			return r
		}
		r.Join = j
	}
	return r
}

// isBottlerocketTOML reports whether user data is TOML settings (Bottlerocket's
// format) rather than a script or YAML.
func isBottlerocketTOML(ud string) bool {
	var doc map[string]any
	if toml.Unmarshal([]byte(ud), &doc) != nil {
		return false
	}
	_, ok := doc["settings"]
	return ok
}

// imdsClient reads the metadata service as the AWS SDK's IMDS client does: a
// session token first, then the path with the token.
type imdsClient struct {
	h     http.Handler
	token string
}

func (c *imdsClient) get(path string) (string, int) {
	if c.token == "" {
		req := httptest.NewRequest(http.MethodPut, "http://169.254.169.254/latest/api/token", nil)
		req.Header.Set(awssim.IMDSTokenTTLHeader, "21600")
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return "", rec.Code
		}
		c.token = rec.Body.String()
	}
	req := httptest.NewRequest(http.MethodGet, "http://169.254.169.254"+path, nil)
	req.Header.Set(awssim.IMDSTokenHeader, c.token)
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	return rec.Body.String(), rec.Code
}

// identityFromIMDS reads what agents take from the metadata service: the
// instance ID, its zone and its host name (the EC2 private DNS name).
func identityFromIMDS(c *imdsClient) (id, zone, host string, err error) {
	for _, f := range []struct {
		path string
		dst  *string
	}{{"/latest/meta-data/instance-id", &id}, {"/latest/meta-data/placement/availability-zone", &zone}, {"/latest/meta-data/local-hostname", &host}} {
		v, code := c.get(f.path)
		if code != http.StatusOK {
			return "", "", "", fmt.Errorf("the metadata service answered %d for %s", code, f.path)
		}
		*f.dst = v
	}
	return id, zone, host, nil
}
