package cloud

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// runForeign starts an instance outside Joiner (as another tool would) with the given tags.
func (e *env) runForeign(tags map[string]string) string {
	e.t.Helper()
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(e.amiX86), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(e.subnets["us-east-1a"]),
	}
	if len(tags) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2Tags(tags)}}
	}
	out, err := e.ec2.RunInstances(context.Background(), in)
	e.must(err)
	return aws.ToString(out.Instances[0].InstanceId)
}

func TestTerminateRefusesForeignInstances(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		p := e.provider()
		mine, err := p.Launch(ctx, cpuRequest(nc, "mine-1", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		foreign := map[string]struct {
			id, reason string
		}{
			"untagged":        {e.runForeign(nil), "has no kubernetes.io/cluster/joiner-test tag"},
			"other cluster":   {e.runForeign(map[string]string{"kubernetes.io/cluster/prod": "owned", TagNodePool: "default"}), "belongs to another cluster (kubernetes.io/cluster/prod)"},
			"no nodepool tag": {e.runForeign(map[string]string{"kubernetes.io/cluster/" + testCluster: "owned"}), "has no karpenter.sh/nodepool tag"},
			"shared":          {e.runForeign(map[string]string{"kubernetes.io/cluster/" + testCluster: "shared", TagNodePool: "default"}), `tag is "shared", not "owned"`},
		}
		for name, f := range foreign {
			_, err := p.Terminate(ctx, mine.ID, f.id)
			var fe *ForeignInstanceError
			if !errors.As(err, &fe) || fe.InstanceID != f.id || !strings.Contains(err.Error(), f.id) || !strings.Contains(err.Error(), f.reason) {
				t.Errorf("%s: err = %v, want a refusal naming %s (%s)", name, err, f.id, f.reason)
			}
		}
		if n := e.proxy.count("TerminateInstances"); n != 0 {
			t.Fatalf("TerminateInstances was sent %d times despite the refusals", n)
		}
		if got := len(e.runningInstances()); got != 5 {
			t.Fatalf("%d instances running, want all 5 untouched", got)
		}

		owned, err := p.ListOwned(ctx)
		if err != nil || len(owned) != 1 || owned[0].ID != mine.ID || owned[0].NodePool != "workload-general" || owned[0].Zone == "" {
			t.Fatalf("ListOwned = %+v, %v: want only Joiner's instance", owned, err)
		}

		res, err := p.Terminate(ctx, mine.ID, "i-0123456789abcdef0")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Terminating) != 1 || res.Terminating[0] != mine.ID || len(res.Gone) != 1 {
			t.Errorf("result %+v: want the owned instance terminating and the unknown one gone", res)
		}
		if st := e.instance(mine.ID).State.Name; st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
			t.Errorf("owned instance is %s", st)
		}
		if owned, _ := p.ListOwned(ctx); len(owned) != 0 {
			t.Errorf("ListOwned after termination: %+v", owned)
		}
		// Terminating it again is a no-op, not an error.
		res, err = p.Terminate(ctx, mine.ID)
		if err != nil || len(res.Gone) != 1 || e.proxy.count("TerminateInstances") != 1 {
			t.Errorf("second terminate: %+v %v", res, err)
		}
	})
}

func TestDryRunLaunchWouldSucceed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		p := e.provider(func(c *Config) { c.DryRun = true })
		inst, err := p.Launch(context.Background(), cpuRequest(nc, "dry-1", []string{"m6i.large"}, nil, "spot", "on-demand"))
		if err != nil {
			t.Fatal(err)
		}
		if inst.ID != "" || len(inst.DryRun) != 2 {
			t.Fatalf("dry run result %+v", inst)
		}
		for i, op := range []string{"CreateLaunchTemplate", "CreateFleet"} {
			r := inst.DryRun[i]
			if r.Operation != op || !r.Allowed || r.PermissionMissing || r.Code != CodeDryRunOperation {
				t.Errorf("dry run %d = %+v, want %s allowed", i, r, op)
			}
		}
		for _, action := range []string{"CreateLaunchTemplate", "CreateFleet"} {
			for _, f := range e.proxy.formsOf(action) {
				if f.Get("DryRun") != "true" {
					t.Errorf("%s sent without DryRun=true", action)
				}
			}
		}
		if n := len(e.templates()); n != 0 {
			t.Errorf("dry run created %d launch templates", n)
		}
		if n := len(e.runningInstances()); n != 0 {
			t.Errorf("dry run launched %d instances", n)
		}
		// Besides the launch's two: the instance profile Joiner would create
		// (IAM has no dry run, so it is reported, not sent).
		if got := p.DryRuns(); len(got) != 3 || got[0].Operation != "CreateInstanceProfile" || got[0].Code != CodeNotChecked {
			t.Errorf("provider recorded %+v, want the profile's answer then the launch's two", got)
		}
	})
}

func TestDryRunPermissionMissing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		e.deny("CreateFleet")
		e.deny("TerminateInstances")
		dry := e.provider(func(c *Config) { c.DryRun = true })
		inst, err := dry.Launch(ctx, cpuRequest(nc, "dry-2", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(inst.DryRun) != 2 || !inst.DryRun[0].Allowed {
			t.Fatalf("dry run %+v", inst.DryRun)
		}
		r := inst.DryRun[1]
		if r.Operation != "CreateFleet" || r.Allowed || !r.PermissionMissing || r.Code != CodeUnauthorizedOperation {
			t.Errorf("CreateFleet dry run = %+v, want permission missing", r)
		}
		if !strings.Contains(r.String(), "permission missing") {
			t.Errorf("summary %q", r.String())
		}

		// Terminate in dry run: allowed, then denied; the instance survives both.
		e.allow("CreateFleet")
		mine, err := e.provider().Launch(ctx, cpuRequest(nc, "dry-3", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		res, err := dry.Terminate(ctx, mine.ID)
		if err != nil || len(res.DryRun) != 1 || !res.DryRun[0].PermissionMissing || len(res.Terminating) != 0 {
			t.Errorf("denied dry-run terminate: %+v %v", res, err)
		}
		e.allow("TerminateInstances")
		res, err = dry.Terminate(ctx, mine.ID)
		if err != nil || len(res.DryRun) != 1 || !res.DryRun[0].Allowed {
			t.Errorf("allowed dry-run terminate: %+v %v", res, err)
		}
		if st := e.instance(mine.ID).State.Name; st != ec2types.InstanceStateNameRunning {
			t.Errorf("instance is %s after dry runs", st)
		}
		// Refusal comes before any dry run: a foreign instance is never even asked about.
		before := e.proxy.count("TerminateInstances")
		if _, err := dry.Terminate(ctx, e.runForeign(nil)); err == nil {
			t.Error("dry run must refuse a foreign instance too")
		}
		if e.proxy.count("TerminateInstances") != before {
			t.Error("a refused dry-run terminate reached the wire")
		}
	})
}
