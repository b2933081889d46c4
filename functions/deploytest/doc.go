// Package deploytest is `cdk deploy` for real (issue 17): Joiner's example
// self-managed stack deployed by the pinned CDK CLI into moto_server (an emulated
// AWS account), and each deployed function run as Lambda would run it — the
// bootstrap the stack uploaded, under the Lambda Runtime Interface Emulator, with the
// environment read back by GetFunctionConfiguration and the credentials of its
// deployed execution role (sts:AssumeRole on moto) — against a real kube-apiserver,
// kube-scheduler and KWOK. The in-cluster forwarder runs beside them with IRSA
// (sts:AssumeRoleWithWebIdentity of the deployed forwarder role with a token the API
// server issued) and puts Pending Pods batches on the deployed bus.
//
// With moto's IAM enforcement on (shared/mototest StartWithIAM: resources and
// conditions evaluated for assumed roles), the test plays a user's first hour
// (pending pods, a NodeClaim, a spot instance with Joiner's instance profile, a spot
// warning, the replacement and drain, a consolidation), checks that every call the
// functions and the forwarder made was allowed and that calls outside the policies are
// refused, tests the deployed rules' patterns against every sample in events/, then
// removes it: `cdk destroy` before `joiner cleanup` must stop at the node role the
// instance profile Joiner made holds (DELETE_FAILED, as on AWS), `joiner cleanup`
// removes the instances Joiner launched (by tag), its launch template and profile, and
// `cdk destroy` again deletes the stack (nothing of it may remain).
//
// It takes about 2.5 minutes with warm caches on two cores (most of it the CDK app's
// synthesis and cdk destroy). JOINER_DEPLOYTEST_LOGS=<dir> keeps moto_iam.py's
// decision log (every authorization check, with its context and result) and the
// events delivered to the Lambda targets there, to read why a call was refused.
//
// The package holds only tests; it is part of `make test`.
package deploytest
