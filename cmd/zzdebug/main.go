package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

func main() {
	seed, _ := strconv.Atoi(os.Args[1])
	snap := workload.Random(int64(seed), 300)
	plan := packer.Solve(snap, packer.Options{})
	for _, e := range check.Plan(snap, plan, snap.Catalog) {
		fmt.Println("ERR", e)
	}
	for _, np := range snap.NodePools {
		fmt.Println("pool", np.Name, np.Spec.Template.Spec.Requirements, np.Spec.Template.Spec.Taints, np.Spec.Limits)
	}
	for _, n := range plan.NewNodes {
		fmt.Println("new", n.Name, n.Zone, n.InstanceType, n.CapacityType, n.Labels["kubernetes.io/arch"], len(n.Options), n.Pods)
	}
	for _, u := range plan.Unschedulable {
		fmt.Println("unsched", u.Pod, u.Reason)
	}
}
