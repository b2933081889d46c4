// Package deploytest is `cdk deploy` for real (issue 17): Joiner's two example stacks,
// self-managed and EKS, deployed by the pinned CDK CLI into one moto_server (an
// emulated AWS account, bootstrapped once), and each deployed function run as Lambda
// would run it — the bootstrap the stack uploaded, under the Lambda Runtime Interface
// Emulator, with the environment read back by GetFunctionConfiguration and the
// credentials of its deployed execution role (sts:AssumeRole on moto) — against a
// real kube-apiserver per cluster.
//
// The self-managed cluster has kube-scheduler and KWOK beside its API server; the
// functions reach it with the ServiceAccount token in the cluster secret. The
// in-cluster forwarder runs beside them with IRSA (sts:AssumeRoleWithWebIdentity of
// the deployed forwarder role with a token the API server issued) and puts Pending
// Pods batches on the deployed bus. With moto's IAM enforcement on (shared/mototest
// StartWithIAM: resources and conditions evaluated for assumed roles), the test plays
// a user's first hour (pending pods, a NodeClaim, a spot instance with Joiner's
// instance profile, a spot warning, the replacement and drain, a consolidation),
// checks that every call the functions and the forwarder made was allowed and that
// calls outside the policies are refused, and tests the deployed rules' patterns
// against every sample in events/.
//
// The EKS cluster is an API server (and kube-scheduler) that authenticates bearer
// tokens as EKS does: a TokenReview webhook (mototest.EKSAuthenticator) checks the
// token the aws-iam-authenticator way, replays its presigned GetCallerIdentity URL to
// moto's STS with its own cluster's x-k8s-aws-id (moto_iam.py checks the signature as
// STS does) and maps the assumed role to the user and groups of the access entry the
// deployed template declares. moto's EKS cluster of that name answers DescribeCluster
// with this API server's endpoint, CA and version. The EKS stack's provisioner, under
// IAM enforcement, runs its launch path as deployed: DescribeCluster, an EKS token,
// the pending pods read and one spot instance launched with the instance profile it
// made for the EKS stack's node role. Another cluster's token, a role without an
// access entry, RBAC outside deploy/ and DescribeCluster of another cluster are refused.
//
// Then both stacks are removed. The self-managed one first as if "Removing" in
// infra/README.md were skipped: `cdk destroy` before `joiner cleanup` must stop at the
// node role the instance profile Joiner made holds (DELETE_FAILED, as on AWS); then
// `joiner cleanup` removes the instances Joiner launched (by tag), its launch template
// and profile, and `cdk destroy` again deletes the stack. The EKS stack goes in the
// documented order. Nothing of either stack may remain but the log groups, kept on
// purpose, which the commands infra/README.md gives then delete.
//
// It takes about two minutes with warm caches on two cores (most of it the CDK app's
// synthesis, twice, and the CDK CLI). JOINER_DEPLOYTEST_LOGS=<dir> keeps moto_iam.py's
// decision log (every authorization check, with its context and result) and the
// events delivered to the Lambda targets there, to read why a call was refused.
//
// The package holds only tests; it is part of `make test`.
package deploytest
