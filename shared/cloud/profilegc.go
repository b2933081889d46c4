package cloud

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// holdingStates are the instance states in which an instance still has its
// instance profile: deleting the profile then would break the instance's
// credentials (IAM does not refuse it).
var holdingStates = []string{"pending", "running", "shutting-down", "stopping", "stopped"}

// CollectInstanceProfiles deletes the instance profiles Joiner created for
// EC2NodeClasses that no longer exist (live names those that do), as
// Karpenter's nodeclass termination does, once no instance holds them: no
// instance of any owner in a state from pending to stopped launched with the
// profile. It returns the profiles deleted.
//
// It runs every consolidator round and is cheap when nothing changed: IAM is
// listed once per container (ListInstanceProfiles, then GetInstanceProfile for
// each profile named like this cluster's, to read its tags), which finds the
// classes deleted while no consolidator ran; after that only a class seen the
// round before and gone now is looked at, and a profile still held is looked
// at again each round until it can go. The memory is the provider's
// InstanceProfileCache (per container in production).
func (p *Provider) CollectInstanceProfiles(ctx context.Context, live []string) ([]string, error) {
	changes, err := p.collect(ctx, live, false)
	deleted := make([]string, 0, len(changes))
	for _, c := range changes {
		deleted = append(deleted, c.Profile)
	}
	return deleted, err
}

// PlanCollectInstanceProfiles returns the deletions CollectInstanceProfiles
// would make now, deleting nothing: shadow mode's. It keeps the same memory (one
// listing per container), and a profile it returned is not returned again by
// the same container: the deletion was decided once.
func (p *Provider) PlanCollectInstanceProfiles(ctx context.Context, live []string) ([]ProfileChange, error) {
	return p.collect(ctx, live, true)
}

// collect deletes (plan: reports) the profiles of the classes not among live
// that no instance holds.
func (p *Provider) collect(ctx context.Context, live []string, plan bool) ([]ProfileChange, error) {
	if p.api.IAM == nil {
		return nil, nil
	}
	c := p.profiles
	alive := make(map[string]bool, len(live))
	for _, n := range live {
		alive[n] = true
	}
	c.mu.Lock()
	swept := c.swept
	for class := range c.live {
		if !alive[class] {
			c.pending[class] = true
		}
	}
	for class := range c.pending {
		if alive[class] {
			delete(c.pending, class) // created again: its profile is in use
		}
	}
	c.live = alive
	c.mu.Unlock()
	if !swept {
		found, err := p.ManagedInstanceProfiles(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		for _, class := range found {
			if !alive[class] {
				c.pending[class] = true
			}
		}
		c.swept = true
		c.mu.Unlock()
	}
	c.mu.Lock()
	pending := make([]string, 0, len(c.pending))
	for class := range c.pending {
		pending = append(pending, class)
	}
	c.mu.Unlock()
	slices.Sort(pending)
	var deleted []ProfileChange
	for _, class := range pending {
		done, gone, err := p.collectProfile(ctx, class, plan)
		if err != nil {
			return deleted, err
		}
		if done {
			c.mu.Lock()
			delete(c.pending, class)
			c.mu.Unlock()
		}
		if gone != "" {
			deleted = append(deleted, ProfileChange{Operation: "DeleteInstanceProfile", Profile: gone, NodeClass: class})
		}
	}
	return deleted, nil
}

// ManagedInstanceProfiles lists the EC2NodeClasses whose instance profile
// Joiner created for this cluster: a profile named as Joiner names the class's
// (InstanceProfileName), with the cluster's and the class's tags.
func (p *Provider) ManagedInstanceProfiles(ctx context.Context) ([]string, error) {
	if p.api.IAM == nil {
		return nil, nil
	}
	var classes []string
	pg := iam.NewListInstanceProfilesPaginator(p.api.IAM, &iam.ListInstanceProfilesInput{})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("ListInstanceProfiles", err)
		}
		for _, ip := range page.InstanceProfiles {
			name := aws.ToString(ip.InstanceProfileName)
			if !strings.HasPrefix(name, p.cfg.ClusterName+"_") {
				continue
			}
			// ListInstanceProfiles returns no tags; GetInstanceProfile does.
			full, err := p.getProfile(ctx, name)
			if err != nil {
				return nil, err
			}
			if full == nil {
				continue
			}
			class := ""
			for _, t := range full.Tags {
				if aws.ToString(t.Key) == TagNodeClass {
					class = aws.ToString(t.Value)
				}
			}
			if class != "" && p.managedBy(full, class) && InstanceProfileName(p.cfg.ClusterName, p.cfg.Region, class) == name {
				classes = append(classes, class)
			}
		}
	}
	return classes, nil
}

// collectProfile deletes the managed profile of a class that is gone unless
// an instance holds it. done says the class needs no more looking at (its
// profile deleted, missing or not Joiner's); deleted names the profile deleted.
// With plan it deletes nothing and names the profile it would delete.
func (p *Provider) collectProfile(ctx context.Context, class string, plan bool) (done bool, deleted string, err error) {
	name := InstanceProfileName(p.cfg.ClusterName, p.cfg.Region, class)
	ip, err := p.getProfile(ctx, name)
	if err != nil || ip == nil {
		return err == nil, "", err
	}
	if !p.managedBy(ip, class) {
		p.log.Warn("instance profile with Joiner's name lacks its tags; leaving it", "name", name, "nodeClass", class)
		return true, "", nil
	}
	holders, err := p.profileHolders(ctx, aws.ToString(ip.Arn), name)
	if err != nil {
		return false, "", err
	}
	if len(holders) > 0 {
		p.log.Info("EC2NodeClass is gone but instances still hold its instance profile; keeping it for now", "name", name,
			"nodeClass", class, "instances", holders)
		return false, "", nil
	}
	if plan {
		return true, name, nil
	}
	ok, err := p.deleteProfile(ctx, ip, class)
	if err != nil {
		return false, "", fmt.Errorf("EC2NodeClass %s was deleted: %w", class, err)
	}
	if !ok { // dry run
		return false, "", nil
	}
	return true, name, nil
}

// profileHolders lists the instances, of any owner, that hold the profile
// (by its ARN, or by its name at any path): a stopped instance gets the
// profile's credentials again when it starts.
func (p *Provider) profileHolders(ctx context.Context, arn, name string) ([]string, error) {
	var ids []string
	pg := ec2.NewDescribeInstancesPaginator(p.api.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("instance-state-name"), Values: holdingStates},
	}})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("DescribeInstances", err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				if in.IamInstanceProfile == nil {
					continue
				}
				got := aws.ToString(in.IamInstanceProfile.Arn)
				if got == arn || strings.HasSuffix(got, "/"+name) {
					ids = append(ids, aws.ToString(in.InstanceId))
				}
			}
		}
	}
	return ids, nil
}
