#!/usr/bin/env bash
# Build a real etcd + kube-apiserver + kube-scheduler and the KWOK controller from the
# Go module proxy (no Docker, no downloads other than Go modules), then smoke-test
# them on loopback. kube-scheduler decides where pods land in the fidelity tests;
# KWOK keeps nodes' heartbeats and pods' status as kubelets would.
# Tested on Debian 12, Go 1.26.8, 2 cores: ~5 min (etcd) + ~23 min (kube-apiserver)
# with a cold module/build cache; re-runs are no-ops once the binaries exist.
#
#   bash scripts/kube-assets.sh            # build into $KAPI_PREFIX/bin, then smoke test
#   bash scripts/kube-assets.sh build      # build only
#   bash scripts/kube-assets.sh smoke      # start etcd + kube-apiserver, kubectl against it, stop
#
# Then for tests:  KUBEBUILDER_ASSETS=$KAPI_PREFIX/bin go test ./...   (controller-runtime envtest)
set -euo pipefail

KAPI_PREFIX=${KAPI_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/joiner/kapi}
K8S_VERSION=${K8S_VERSION:-v1.37.2}     # k8s.io/kubernetes; v1.37.x needs go >= 1.26.0
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}   # go.etcd.io/etcd/server/v3 (3.6.13..3.7.3 served)
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}    # sigs.k8s.io/kwok (no replace directives: go install works)
BIN=$KAPI_PREFIX/bin
# Keep caches inside the prefix unless the caller chose others (both are reusable).
export GOMODCACHE=${GOMODCACHE:-$KAPI_PREFIX/gomodcache}
export GOCACHE=${GOCACHE:-$KAPI_PREFIX/gocache}
export GOFLAGS=${GOFLAGS:--buildvcs=false}
export CGO_ENABLED=0                    # static binaries, like the upstream release builds
mkdir -p "$BIN"

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}          # 37
STAGING_VERSION=v0.${K8S_VERSION#v1.}                   # v0.37.2

build_etcd() {
  if [ -x "$BIN/etcd" ] && "$BIN/etcd" --version | grep -q "etcd Version: ${ETCD_VERSION#v}$"; then
    echo "etcd ${ETCD_VERSION} already built"; return; fi
  # `go install go.etcd.io/etcd/server/v3@vX` is refused (its go.mod has replace
  # directives), so build it as a tool of a scratch module instead.
  local d=$KAPI_PREFIX/etcd-build
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init kapi/etcdbuild
  go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  time go build -trimpath -ldflags='-s -w' -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  "$BIN/etcd" --version
}

build_kube_apiserver() {
  if [ -x "$BIN/kube-apiserver" ] && [ "$("$BIN/kube-apiserver" --version)" = "Kubernetes ${K8S_VERSION}" ]; then
    echo "kube-apiserver ${K8S_VERSION} already built"; return; fi
  local d=$KAPI_PREFIX/build
  rm -rf "$d"; mkdir -p "$d"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
  # ./staging/...; those replaces are ignored outside its own repo, so the scratch
  # module must replace every required k8s.io/* v0.0.0 with the published v0.X.Y.
  cd "$d"
  go mod init kapi/build
  local gomod   # path of k8s.io/kubernetes' go.mod in the module cache
  gomod=$(go list -mod=mod -m -f '{{.GoMod}}' "k8s.io/kubernetes@${K8S_VERSION}")
  go mod edit -require="k8s.io/kubernetes@${K8S_VERSION}"
  # only modules that are actually required at v0.0.0 (sample-cli-plugin and
  # sample-controller are replaced upstream but not required, and not published).
  awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u > staging.txt
  while read -r m; do go mod edit -replace="$m=$m@${STAGING_VERSION}"; done < staging.txt
  echo "replaced $(wc -l < staging.txt) staging modules with ${STAGING_VERSION}"
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@${K8S_VERSION}"
  local V=k8s.io/component-base/version
  local ld="-s -w -X $V.gitVersion=${K8S_VERSION} -X $V.gitMajor=1 -X $V.gitMinor=${minor} -X $V.gitTreeState=clean -X $V.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  time go build -trimpath -ldflags="$ld" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  "$BIN/kube-apiserver" --version
}

# kube-scheduler from the same scratch module: it shares almost every package with
# kube-apiserver, so after it the build takes a few minutes, not twenty.
build_kube_scheduler() {
  if [ -x "$BIN/kube-scheduler" ] && [ "$("$BIN/kube-scheduler" --version)" = "Kubernetes ${K8S_VERSION}" ]; then
    echo "kube-scheduler ${K8S_VERSION} already built"; return; fi
  local d=$KAPI_PREFIX/build
  [ -f "$d/go.mod" ] || { echo "kube-scheduler: $d/go.mod missing (build kube-apiserver first)"; exit 1; }
  cd "$d"
  go get -tool "k8s.io/kubernetes/cmd/kube-scheduler@${K8S_VERSION}"
  local V=k8s.io/component-base/version
  local ld="-s -w -X $V.gitVersion=${K8S_VERSION} -X $V.gitMajor=1 -X $V.gitMinor=${minor} -X $V.gitTreeState=clean -X $V.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  time go build -trimpath -ldflags="$ld" -o "$BIN/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
  "$BIN/kube-scheduler" --version
}

build_kwok() {
  if [ -x "$BIN/kwok" ] && "$BIN/kwok" --version 2>/dev/null | grep -q "${KWOK_VERSION#v}"; then
    echo "kwok ${KWOK_VERSION} already built"; return; fi
  local V=sigs.k8s.io/kwok/pkg/consts
  time GOBIN="$BIN" go install -trimpath -ldflags="-s -w -X $V.Version=${KWOK_VERSION#v}" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  "$BIN/kwok" --version
}

link_kubectl() {
  # envtest only needs kubectl if a test calls ControlPlane.KubeCtl(); any kubectl works for smoke.
  if command -v kubectl >/dev/null && [ ! -e "$BIN/kubectl" ]; then ln -s "$(command -v kubectl)" "$BIN/kubectl"; fi
}

smoke() {
  local W; W=$(mktemp -d "$KAPI_PREFIX/smoke.XXXXXX")
  local EP=${ETCD_PORT:-23790} AP=${APISERVER_PORT:-64430}
  openssl genrsa -out "$W/sa.key" 2048 2>/dev/null
  openssl rsa -in "$W/sa.key" -pubout -out "$W/sa.pub" 2>/dev/null
  echo "smoke-token,admin,admin-uid,system:masters" > "$W/tokens.csv"
  local t0=$SECONDS
  "$BIN/etcd" --data-dir "$W/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$EP" --advertise-client-urls "http://127.0.0.1:$EP" \
    --listen-peer-urls http://127.0.0.1:0 > "$W/etcd.log" 2>&1 &
  SMOKE_PIDS=$!
  # --advertise-address=127.0.0.1 is refused by the endpoint reconciler (1.37: "may not be in
  # the loopback range") unless --endpoint-reconciler-type=none. (envtest sets neither and lets
  # kube-apiserver advertise the host's first non-loopback IP.)
  "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$EP" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
    --secure-port "$AP" --cert-dir "$W/certs" --service-cluster-ip-range 10.0.0.0/24 \
    --service-account-issuer "https://127.0.0.1:$AP/" \
    --service-account-key-file "$W/sa.pub" --service-account-signing-key-file "$W/sa.key" \
    --token-auth-file "$W/tokens.csv" --authorization-mode RBAC \
    --disable-admission-plugins ServiceAccount --allow-privileged=true > "$W/apiserver.log" 2>&1 &
  SMOKE_PIDS="$SMOKE_PIDS $!"
  trap 'kill $SMOKE_PIDS 2>/dev/null; wait $SMOKE_PIDS 2>/dev/null' EXIT
  local K="kubectl --server https://127.0.0.1:$AP --insecure-skip-tls-verify --token smoke-token"
  local ok=
  for _ in $(seq 1 120); do
    if $K get --raw /readyz >/dev/null 2>&1; then ok=1; break; fi; sleep 0.5
  done
  if [ -z "$ok" ]; then echo "kube-apiserver not ready; tail of $W/apiserver.log:"; tail -20 "$W/apiserver.log"; exit 1; fi
  echo "readyz ok after $((SECONDS - t0))s"
  $K version 2>/dev/null | grep -i server || true
  $K create namespace smoke
  $K -n smoke apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
EOF
  $K -n smoke get pods -o wide
  local e a; read -r e a <<<"$SMOKE_PIDS"
  echo "RSS kB: etcd $(awk '/VmRSS/{print $2}' "/proc/$e/status") kube-apiserver $(awk '/VmRSS/{print $2}' "/proc/$a/status")"
  echo "smoke OK (logs in $W)"
}

case "${1:-all}" in
  build) build_etcd; build_kube_apiserver; build_kube_scheduler; build_kwok; link_kubectl ;;
  smoke) smoke ;;
  all)   build_etcd; build_kube_apiserver; build_kube_scheduler; build_kwok; link_kubectl; smoke ;;
  *) echo "usage: $0 [build|smoke|all]"; exit 2 ;;
esac
ls -la "$BIN"
