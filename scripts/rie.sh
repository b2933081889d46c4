#!/usr/bin/env bash
# Install the AWS Lambda Runtime Interface Emulator (the program `sam local invoke`
# runs inside its container) from the Go module proxy, once, and print its path.
# functions/rietest runs each function's bootstrap under it.
#
#   bash scripts/rie.sh        # -> ${XDG_CACHE_HOME:-$HOME/.cache}/joiner/bin/aws-lambda-rie
#
# Pinned to a pseudo-version so every machine runs the same emulator; ~80 s cold on
# 2 cores, a no-op once the binary exists.
set -euo pipefail

RIE_VERSION=${RIE_VERSION:-v0.0.0-20261030222936-bef5c4ba774d}
BIN=${XDG_CACHE_HOME:-$HOME/.cache}/joiner/bin
RIE=$BIN/aws-lambda-rie

if [ ! -x "$RIE" ]; then
  mkdir -p "$BIN"
  # Outside the repository's module so its go.mod is neither read nor changed.
  cd "$BIN"
  echo "installing aws-lambda-rie@${RIE_VERSION} into $BIN" >&2
  GOBIN=$BIN GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install \
    "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@${RIE_VERSION}" >&2
fi
echo "$RIE"
