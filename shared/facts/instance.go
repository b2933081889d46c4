package facts

import "strings"

// ValidInstanceID reports whether s is an EC2 instance ID as EC2 issues them: "i-"
// and 8 or 17 lowercase hex digits. Decoders of inbound events check it, so that
// nothing else reaches an EC2 filter or a tag lookup.
func ValidInstanceID(s string) bool {
	if !strings.HasPrefix(s, "i-") {
		return false
	}
	h := s[2:]
	if len(h) != 8 && len(h) != 17 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// maxInstanceIDLen is the length of the longest EC2 instance ID (i- and 17 digits).
const maxInstanceIDLen = 19

// InstanceID is the EC2 instance ID an AWS providerID names, or "" when it names
// none. The form is the one the AWS cloud provider, nodeadm and Karpenter write
// and Karpenter's ParseInstanceID reads: aws:///<zone>/<instance-id>. Anything
// else is "": another provider's ID, a Fargate node's
// (aws:///<zone>/<hash>/fargate-ip-...), a missing zone or ID, extra segments,
// whitespace, upper case.
//
// The ID itself must be "i-" and at most 17 lowercase letters or digits, not
// necessarily hex (ValidInstanceID is the strict check for input from outside):
// a providerID is only ever compared with IDs EC2 gave Joiner, and what reaches
// EC2 from it is checked by the provider's ownership rules, so this only has to
// guarantee one well-formed token.
func InstanceID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return ""
	}
	zone, id, ok := strings.Cut(rest, "/")
	if !ok || zone == "" || !lowerAlnum(zone, true) {
		return ""
	}
	if len(id) < 3 || len(id) > maxInstanceIDLen || !strings.HasPrefix(id, "i-") || !lowerAlnum(id[2:], false) {
		return ""
	}
	return id
}

// lowerAlnum reports whether s is only lowercase letters and digits (and hyphens
// when hyphen is true, as in zone names such as us-west-2-lax-1a).
func lowerAlnum(s string, hyphen bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && hyphen:
		default:
			return false
		}
	}
	return true
}
