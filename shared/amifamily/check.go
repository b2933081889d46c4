package amifamily

import (
	"fmt"
	"strings"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// CheckUserData returns what an EC2NodeClass's userData will get wrong on the
// node, before any node boots:
//
//   - an error when a shell script reads the instance metadata service without
//     an IMDSv2 token while metadataOptions.httpTokens is required (the
//     default): EC2 answers 401, the script gets empty values and the node never
//     matches its NodeClaim;
//   - a warning for each line holding a literal credential (a kubeadm bootstrap
//     token, AWS keys, a private key), naming the SSM and Secrets Manager
//     annotations Joiner reads the token from instead.
//
// A class of an unknown family gets nothing here (validation reports the family).
func CheckUserData(nc *karpenter.EC2NodeClass) []karpenter.Problem {
	if nc.Spec.UserData == nil || strings.TrimSpace(*nc.Spec.UserData) == "" {
		return nil
	}
	f, err := Of(nc)
	if err != nil {
		return nil
	}
	ud := *nc.Spec.UserData
	var out []karpenter.Problem
	if reads := bootstrap.IMDSv1Reads(ud); f.FeatureFlags().ShellUserData && len(reads) > 0 && HTTPTokens(nc) == "required" {
		out = append(out, karpenter.Problem{Path: "spec.userData", Message: IMDSv1Cause(reads) + "; " + IMDSv1Fix, Runtime: true})
	}
	if names, err := bootstrap.Placeholders(ud); err == nil && len(names) > 0 && !f.FeatureFlags().UserDataIsBootstrap {
		out = append(out, karpenter.Problem{Path: "spec.userData", Warning: true, Message: fmt.Sprintf(
			"{{ .%s }} is filled only for amiFamily Custom; amiFamily %s passes userData to the node as written", names[0], f.Name())})
	}
	for _, s := range bootstrap.LiteralSecrets(ud) {
		out = append(out, karpenter.Problem{Path: "spec.userData", Warning: true, Message: fmt.Sprintf(
			"%s holds a literal %s (%s): anyone allowed ec2:DescribeLaunchTemplateVersions, and every process on the node, can read it; "+
				"store the token in SSM Parameter Store as a SecureString (annotation %s: /your/parameter) or in Secrets Manager (annotation %s: your-secret) "+
				"and write {{ .%s }} where it goes: the node reads it with its own role at boot, and Joiner never sees it",
			s.Where, s.Kind, s.Line, bootstrap.AnnotationTokenParameter, bootstrap.AnnotationTokenSecret, bootstrap.PlaceholderBootstrapToken)})
	}
	return out
}

// HTTPTokens is the class's metadataOptions.httpTokens, Karpenter's default
// ("required") when unset.
func HTTPTokens(nc *karpenter.EC2NodeClass) string {
	if m := nc.Spec.MetadataOptions; m != nil && m.HTTPTokens != nil && *m.HTTPTokens != "" {
		return *m.HTTPTokens
	}
	return karpenter.DefaultHTTPTokens
}

// IMDSv1Cause says what metadata reads without a token do when tokens are
// required; the registration-timeout Event and the replay summary quote it.
func IMDSv1Cause(reads []bootstrap.Finding) string {
	s := "user data reads instance metadata without an IMDSv2 token"
	if len(reads) > 0 {
		s += " at " + reads[0].String()
		if len(reads) > 1 {
			s += fmt.Sprintf(" and %d more", len(reads)-1)
		}
	}
	return s + " while metadataOptions.httpTokens is required (the default): EC2 answers those reads 401 with an empty body, so the script sees empty values (an empty instance ID, a malformed provider ID) and the node never matches its NodeClaim"
}

// IMDSv1Fix is the way out, with the security trade-off in one line.
const IMDSv1Fix = "fetch a session token first and send it with every read " +
	`(TOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300'); curl -s -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-id), ` +
	"or set spec.metadataOptions.httpTokens: optional (trade-off: IMDSv1 lets any process or SSRF bug on the node that can send a GET read the node role's credentials)"
