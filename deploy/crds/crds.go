// Package crds holds Karpenter's own CustomResourceDefinitions (NodePool, NodeClaim,
// EC2NodeClass) exactly as Karpenter publishes them, at the release Joiner targets.
// The YAML files beside this one are written by gen.go (go generate ./deploy/crds)
// from the Go modules sigs.k8s.io/karpenter and github.com/aws/karpenter-provider-aws,
// never by hand: Joiner and Karpenter must serve the same objects with the same
// schema, defaults and CEL validation, so that a cluster can move between them in
// either direction without touching a node.
package crds

//go:generate go run gen.go

// The release pair the CRDs come from. The AWS provider publishes the karpenter.sh
// CRDs too, with its own additions (a restricted karpenter.k8s.aws label domain); an
// AWS cluster runs those, so they are the ones installed. gen.go checks they are the
// core module's files plus additions only, so the two versions are a consistent pair.
//
// provider-aws v1.15.2's go.mod asks for sigs.k8s.io/karpenter v1.15.1, which the Go
// module proxy does not serve; its CRD files are byte-identical to provider-aws
// v1.15.0's, whose go.mod pins sigs.k8s.io/karpenter v1.15.0.
const (
	CoreModule      = "sigs.k8s.io/karpenter"
	CoreVersion     = "v1.15.0"
	ProviderModule  = "github.com/aws/karpenter-provider-aws"
	ProviderVersion = "v1.15.2"
	// Dir is where both modules keep their generated CRDs.
	Dir = "pkg/apis/crds"
)

// Files are the CRDs Joiner installs, by file name (the same in both modules).
// NodeOverlay and CapacityBuffer are left out: Joiner does not act on them, and
// installing them would promise behaviour it does not have.
var Files = []string{
	"karpenter.sh_nodepools.yaml",
	"karpenter.sh_nodeclaims.yaml",
	"karpenter.k8s.aws_ec2nodeclasses.yaml",
}

// CoreFiles are the Files the core module publishes as well; gen.go checks the
// provider's copy against them.
var CoreFiles = []string{"karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml"}

// SumsFile records, per installed file, the module it was taken from, the module's
// go.sum hash and the SHA-256 of the published file, so a test can check deploy/crds
// offline and, when the module cache has the modules, against the modules themselves.
const SumsFile = "SOURCES"
