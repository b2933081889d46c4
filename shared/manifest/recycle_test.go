package manifest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Trees of Pods and workloads go back to a pool once decoded. If a decoded object
// kept any part of its tree, later documents would overwrite it: decoding the same
// mixed file with and without recycling must give equal objects and problems.
func TestRecycledTreesLeaveObjectsIntact(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 300; i++ {
		switch i % 5 {
		case 0, 1:
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata:
  name: p-%d
  labels: {app: a%d, tier: "%d"}
  annotations:
    note: "n%d"
spec:
  nodeSelector:
    kubernetes.io/arch: amd64
  tolerations:
  - {key: gpu, operator: Exists, effect: NoSchedule}
  containers:
  - name: c
    image: pause
    resources:
      requests: {cpu: %dm, memory: %dMi}
      limits: {nvidia.com/gpu: "%d"}
`, i, i%7, i, i, 100+i, 64+i, i%2)
		case 2:
			fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d-%d, namespace: ns%d}
spec:
  replicas: %d
  selector: {matchLabels: {app: d%d}}
  template:
    metadata: {labels: {app: d%d}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {app: d%d}}
      containers:
      - {name: c, image: pause, resources: {requests: {cpu: "%d", memory: 1Gi}}}
`, i, i%3, 1+i%4, i, i, i, 1+i%3)
		case 3:
			fmt.Fprintf(&b, `---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: pool-%d}
spec:
  template:
    metadata: {labels: {team: t%d}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
  limits: {cpu: "%d"}
`, i, i, 100+i)
		case 4:
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: bad-%d}
spec:
  containers:
  - name: c
    image: pause
    resources: {requests: {cpu: 1}}
    unknownField: %d
`, i, i)
		}
	}
	text := b.String()
	recycled := Decode("mixed.yaml", []byte(text))
	recycleTrees = false
	defer func() { recycleTrees = true }()
	fresh := Decode("mixed.yaml", []byte(text))
	if len(fresh.Pods) < 100 || len(fresh.NodePools) != 60 || len(fresh.Problems) < 60 {
		t.Fatalf("unexpected input: %d pods, %d pools, %d problems", len(fresh.Pods), len(fresh.NodePools), len(fresh.Problems))
	}
	if !reflect.DeepEqual(recycled.Pods, fresh.Pods) {
		t.Error("pods differ when trees are recycled")
	}
	if !reflect.DeepEqual(recycled.NodePools, fresh.NodePools) {
		t.Error("NodePools differ when trees are recycled")
	}
	if !reflect.DeepEqual(recycled.Problems, fresh.Problems) {
		t.Errorf("problems differ when trees are recycled:\n%s\nvs\n%s", dump(recycled), dump(fresh))
	}
}
