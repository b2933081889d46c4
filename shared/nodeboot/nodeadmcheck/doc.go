// Package nodeadmcheck checks the AL2023 user data Joiner writes with nodeadm's own
// API types (github.com/awslabs/amazon-eks-ami/nodeadm/api/v1alpha1): every
// NodeConfig part decodes, strictly, as node.eks.aws/v1alpha1 NodeConfig, and the
// merged configuration passes the checks nodeadm makes before it configures the
// kubelet. It is a module of its own so that nodeadm's dependency tree
// (controller-runtime, containerd, the AWS SDK v1) stays out of Joiner's go.mod and
// its Lambda binaries; `make test` runs it.
package nodeadmcheck
