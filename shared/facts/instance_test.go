package facts

import (
	"strings"
	"testing"
)

func TestInstanceID(t *testing.T) {
	for _, tc := range []struct{ providerID, want string }{
		{"aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"aws:///eu-west-1c/i-0a1b2c3d", "i-0a1b2c3d"},
		{"aws:///us-west-2-lax-1a/i-0123456789abcdef0", "i-0123456789abcdef0"}, // Local Zone
		{"aws:///us-east-1-wl1-bos-wlz-1/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"aws:///us-east-1a/i-0claimed", "i-0claimed"},
		{"", ""},
		{"aws://", ""},
		{"aws:///", ""},
		{"aws:////", ""},
		{"aws:///us-east-1a", ""},
		{"aws:///us-east-1a/", ""},
		{"aws:///us-east-1a/i-", ""},
		{"aws:///i-0123456789abcdef0", ""},                  // no zone
		{"aws:////i-0123456789abcdef0", ""},                 // empty zone
		{"aws://us-east-1a/i-0123456789abcdef0", ""},        // two slashes: the zone as a host
		{"aws:///us-east-1a/i-0123456789abcdef0/", ""},      // trailing slash
		{"aws:///us-east-1a/i-0123456789abcdef0/extra", ""}, // extra segment
		{"aws:///us-east-1a/b/i-0123456789abcdef0", ""},
		{"aws:///us-east-1b/5c2a7fbdd5-3e5e4c7bd2/fargate-ip-192-168-1-1.ec2.internal", ""}, // Fargate
		{"aws:///us-east-1a/fargate-ip-192-168-1-1", ""},
		{"aws:///us-east-1a/vol-0123456789abcdef0", ""},
		{"aws:///us-east-1a/i-0123456789ABCDEF0", ""},
		{"AWS:///us-east-1a/i-0123456789abcdef0", ""},
		{"aws:///US-EAST-1A/i-0123456789abcdef0", ""},
		{" aws:///us-east-1a/i-0123456789abcdef0", ""},
		{"aws:///us-east-1a/i-0123456789abcdef0 ", ""},
		{"aws:///us-east-1a/i-0123456789abcdef0\n", ""},
		{"aws:///us-east-1a/i-01234 56789", ""},
		{"aws:///us-east-1a/i-0123456789abcdef0?x=1", ""},
		{"aws:///us-east-1a/i-0123456789abcdef0#frag", ""},
		{"aws:///us-east-1a/..%2Fi-0123456789abcdef0", ""},
		{"aws:///../i-0123456789abcdef0", ""},
		{"aws:///us-east-1a/i-0123456789abcdef01", ""}, // 18 digits: longer than any EC2 ID
		{"aws:///us-east-1a/i-" + strings.Repeat("a", 1000), ""},
		{"aws:///us-east-1a/i-0123456789abcdé", ""},
		{"gce://project/us-central1-a/i-0123456789abcdef0", ""},
		{"kwok://i-0123456789abcdef0", ""},
		{"i-0123456789abcdef0", ""},
		{"aws:///us-east-1a/i-0123456789abcdef0\x00", ""},
	} {
		if got := InstanceID(tc.providerID); got != tc.want {
			t.Errorf("InstanceID(%q) = %q, want %q", tc.providerID, got, tc.want)
		}
	}
}

func TestValidInstanceID(t *testing.T) {
	for s, want := range map[string]bool{
		"i-0123456789abcdef0": true, "i-0a1b2c3d": true,
		"": false, "i-": false, "i-0claimed": false, "i-0123456789ABCDEF0": false, "i-0123456789abcdef": false,
		"i-0123456789abcdef01": false, "vol-0a1b2c3d": false, " i-0a1b2c3d": false, "i-0a1b2c3d\n": false,
	} {
		if got := ValidInstanceID(s); got != want {
			t.Errorf("ValidInstanceID(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzInstanceID: whatever the input, an ID is returned only when the input is
// exactly aws:///<zone>/<that ID>, and the ID is one token EC2 could have issued
// in shape; every ValidInstanceID is found again in the providerID built from it.
func FuzzInstanceID(f *testing.F) {
	for _, s := range []string{"aws:///us-east-1a/i-0123456789abcdef0", "aws:///us-east-1a/i-0claimed", "aws:///",
		"aws:////i-0a1b2c3d", "aws:///z/i-0a1b2c3d/x", "aws:///us-east-1b/5c2a/fargate-ip-1", "gce://p/z/i-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id := InstanceID(s)
		if id == "" {
			if rest, ok := strings.CutPrefix(s, "i-"); ok && ValidInstanceID(s) && rest != "" {
				if got := InstanceID("aws:///us-east-1a/" + s); got != s {
					t.Fatalf("valid instance ID %q not found in its providerID (got %q)", s, got)
				}
			}
			return
		}
		zone, ok := strings.CutSuffix(strings.TrimPrefix(s, "aws:///"), "/"+id)
		if !strings.HasPrefix(s, "aws:///") || !ok || zone == "" || strings.ContainsAny(zone, "/ \t\r\n") {
			t.Fatalf("InstanceID(%q) = %q: the input is not aws:///<zone>/<id>", s, id)
		}
		if !strings.HasPrefix(id, "i-") || len(id) > maxInstanceIDLen || strings.ContainsAny(id, "/ \t\r\n?#%") || strings.ToLower(id) != id {
			t.Fatalf("InstanceID(%q) = %q: not one lowercase i- token", s, id)
		}
		if InstanceID("aws:///"+zone+"/"+id) != id {
			t.Fatalf("InstanceID not stable for %q", s)
		}
	})
}
