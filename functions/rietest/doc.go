// Package rietest proves that each Lambda function runs as `sam local invoke` runs
// it: its bootstrap, built as for the provided.al2023 runtime (for the host
// architecture), is started under the AWS Lambda Runtime Interface Emulator — the
// program inside SAM's container — and every sample event in events/ is posted to
// it over HTTP. The functions reach a real kube-apiserver (kubeconfig access) and
// the wire-level AWS simulator (AWS_ENDPOINT_URL), so what is checked is the whole
// path: runtime API, environment configuration, decoding, handling, response and
// logs. The package holds only tests; scripts/rie.sh installs the emulator.
package rietest
