package cloud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// OwnedInstance is an instance that carries this cluster's ownership tag and
// a NodePool tag.
type OwnedInstance struct {
	ID           string
	InstanceType string
	Zone         string
	State        string
	CapacityType string
	NodePool     string
	NodeClaim    string
	NodeClass    string
	LaunchTime   time.Time
	Tags         map[string]string
}

// TerminateResult reports a Terminate call.
type TerminateResult struct {
	// Terminating lists the instances TerminateInstances accepted.
	Terminating []string
	// Gone lists instances that no longer exist or are already terminating.
	Gone []string
	// DryRun is the dry-run answer when Config.DryRun is set.
	DryRun []DryRunResult
}

// owned says why an instance is not Joiner's to touch, or "" when it is.
func (p *Provider) whyForeign(tags map[string]string) string {
	switch v, ok := tags[p.ownerTagKey()]; {
	case !ok:
		for k := range tags {
			if strings.HasPrefix(k, "kubernetes.io/cluster/") {
				return fmt.Sprintf("it belongs to another cluster (%s), not %s", k, p.cfg.ClusterName)
			}
		}
		return fmt.Sprintf("it has no %s tag", p.ownerTagKey())
	case v != "owned":
		return fmt.Sprintf("its %s tag is %q, not \"owned\"", p.ownerTagKey(), v)
	}
	if tags[TagNodePool] == "" {
		return fmt.Sprintf("it has no %s tag, so no NodePool launched it", TagNodePool)
	}
	return ""
}

// Terminate terminates instances Joiner launched. It reads the instances
// first; if any of them lacks this cluster's ownership tag or a NodePool tag,
// the whole request is refused with a *ForeignInstanceError naming it and
// nothing is sent. Instances already gone are reported, not an error.
func (p *Provider) Terminate(ctx context.Context, ids ...string) (TerminateResult, error) {
	var res TerminateResult
	if len(ids) == 0 {
		return res, nil
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	found := map[string]ec2types.Instance{}
	// A filter answers for the IDs that exist instead of failing the batch on one unknown ID.
	pg := ec2.NewDescribeInstancesPaginator(p.api.EC2, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}},
	})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return res, wrap("DescribeInstances", err)
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				found[aws.ToString(i.InstanceId)] = i
			}
		}
	}
	var targets []string
	var refused []error
	for _, id := range ids {
		inst, ok := found[id]
		if !ok {
			res.Gone = append(res.Gone, id)
			continue
		}
		if why := p.whyForeign(tagMap(inst.Tags)); why != "" {
			refused = append(refused, &ForeignInstanceError{InstanceID: id, Reason: why})
			continue
		}
		if inst.State != nil && (inst.State.Name == ec2types.InstanceStateNameTerminated || inst.State.Name == ec2types.InstanceStateNameShuttingDown) {
			res.Gone = append(res.Gone, id)
			continue
		}
		targets = append(targets, id)
	}
	if len(refused) > 0 {
		p.log.Error("terminate refused: not launched by Joiner for this cluster", "instances", ids, "error", errors.Join(refused...).Error())
		return TerminateResult{}, errors.Join(refused...)
	}
	if len(targets) == 0 {
		return res, nil
	}
	out, err := p.api.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: targets, DryRun: aws.Bool(p.cfg.DryRun)})
	if p.cfg.DryRun {
		r, ok := dryRunOutcome("TerminateInstances", strings.Join(targets, ","), err)
		if !ok {
			return res, wrap("TerminateInstances (dry run)", err)
		}
		p.recordDryRun(r, &res.DryRun)
		return res, nil
	}
	if err != nil {
		return res, wrap("TerminateInstances "+strings.Join(targets, ","), err)
	}
	for _, c := range out.TerminatingInstances {
		res.Terminating = append(res.Terminating, aws.ToString(c.InstanceId))
	}
	p.log.Info("terminating instances", "instances", res.Terminating)
	return res, nil
}

// ListOwned lists the instances this cluster's Joiner launched that are not
// terminated: the input of leak clean-up (an owned instance no NodeClaim records).
func (p *Provider) ListOwned(ctx context.Context) ([]OwnedInstance, error) {
	var out []OwnedInstance
	pg := ec2.NewDescribeInstancesPaginator(p.api.EC2, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + p.ownerTagKey()), Values: []string{"owned"}},
			{Name: aws.String("tag-key"), Values: []string{TagNodePool}},
			// shutting-down instances are already on their way out.
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
		},
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("DescribeInstances", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				tags := tagMap(i.Tags)
				// The filters already say so; checking again costs nothing and
				// keeps a lenient endpoint from widening what Joiner may touch.
				if p.whyForeign(tags) != "" {
					continue
				}
				o := OwnedInstance{
					ID: aws.ToString(i.InstanceId), InstanceType: string(i.InstanceType), NodePool: tags[TagNodePool],
					NodeClaim: tags[TagNodeClaim], NodeClass: tags[TagNodeClass], Tags: tags, CapacityType: "on-demand",
				}
				if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
					o.CapacityType = "spot"
				}
				if i.Placement != nil {
					o.Zone = aws.ToString(i.Placement.AvailabilityZone)
				}
				if i.State != nil {
					o.State = string(i.State.Name)
				}
				if i.LaunchTime != nil {
					o.LaunchTime = *i.LaunchTime
				}
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b OwnedInstance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
