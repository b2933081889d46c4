package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// deployments returns n Deployments of replicas pods each, shaped like a real
// workload (labels, requests and limits, tolerations, affinity, spread).
func deployments(n, replicas int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%d
  namespace: team-%d
spec:
  replicas: %d
  selector:
    matchLabels: {app: app-%d}
  template:
    metadata:
      labels: {app: app-%d, tier: web}
      annotations: {prometheus.io/scrape: "true"}
    spec:
      containers:
        - name: main
          image: public.ecr.aws/example/app:1.0
          resources:
            requests: {cpu: 250m, memory: 512Mi}
            limits: {cpu: "1", memory: 1Gi}
          env: [{name: MODE, value: prod}]
        - name: sidecar
          image: public.ecr.aws/example/proxy:1.0
          resources:
            requests: {cpu: 50m, memory: 64Mi}
      tolerations:
        - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
      nodeSelector: {kubernetes.io/arch: amd64}
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector: {matchLabels: {app: app-%d}}
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector: {matchLabels: {app: app-%d}}
`, i, i%7, replicas, i, i, i, i)
	}
	return []byte(b.String())
}

// BenchmarkDecodeDeployments measures decoding manifests whose Deployments expand
// into 20,000 pods in all (the target is well under 100 ms per op).
func BenchmarkDecodeDeployments(b *testing.B) {
	for _, c := range []struct{ deployments, replicas int }{{1, 20000}, {20, 1000}, {200, 100}} {
		data := deployments(c.deployments, c.replicas)
		b.Run(fmt.Sprintf("%dx%d", c.deployments, c.replicas), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				bundle := Decode("bench.yaml", data)
				if len(bundle.Pods) != 20000 || len(bundle.Problems) != 0 {
					b.Fatalf("pods %d problems:\n%s", len(bundle.Pods), dump(bundle))
				}
			}
		})
	}
}

// BenchmarkDecodePods measures one document per pod, the shape of `kubectl get pods -o yaml`
// split into documents (slower per pod than expansion: each is parsed).
func BenchmarkDecodePods(b *testing.B) {
	var s strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&s, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p-%d, labels: {app: x}}\nspec:\n  containers: [{name: c, image: i, resources: {requests: {cpu: 100m, memory: 128Mi}}}]\n", i)
	}
	data := []byte(s.String())
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if bundle := Decode("pods.yaml", data); len(bundle.Pods) != 2000 {
			b.Fatalf("pods %d", len(bundle.Pods))
		}
	}
}
