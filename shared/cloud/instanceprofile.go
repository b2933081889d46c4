package cloud

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// IAMAPI is the part of *iam.Client the provider calls: the instance profile
// of an EC2NodeClass that names a role is Joiner's to create, keep holding
// that role, and delete with the class.
type IAMAPI interface {
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	// ListInstanceProfiles finds, once per container, the profiles of classes
	// deleted while no consolidator ran (see CollectInstanceProfiles).
	ListInstanceProfiles(context.Context, *iam.ListInstanceProfilesInput, ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

// Tags an instance profile Joiner creates carries: Karpenter's, so that the
// reference policy's AllowScopedInstanceProfile* statements, which condition
// on them, cover Joiner, and a profile either created can be told apart from
// every other profile in the account.
// (TagEKSClusterName is also on every instance.)
const TagRegion = corev1.LabelTopologyRegion

// IAM error codes the provider acts on.
const (
	codeNoSuchEntity        = "NoSuchEntity"
	codeEntityAlreadyExists = "EntityAlreadyExists"
)

// InstanceProfileName is the name of the instance profile Joiner manages for
// an EC2NodeClass with spec.role: <cluster>_<FNV-1 64 of region+class name>,
// the name Karpenter v1.0–v1.9 derives (EC2NodeClass.InstanceProfileName,
// with hashstructure's FNV-1 of the string). The name depends on nothing
// that changes, so every invocation finds the same profile without state,
// and a profile Karpenter created for the class is the one Joiner adopts.
func InstanceProfileName(clusterName, region, nodeClass string) string {
	h := fnv.New64()
	h.Write([]byte(region + nodeClass))
	return fmt.Sprintf("%s_%d", clusterName, h.Sum64())
}

// InstanceProfileCache remembers, for a warm container, which managed
// instance profiles were seen holding their role: a launch then needs no IAM
// call. It is safe for concurrent use.
type InstanceProfileCache struct {
	clock func() time.Time
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]profileEntry // profile name →
	// What CollectInstanceProfiles keeps between rounds: whether the account's
	// profiles were listed once (swept), the classes that existed last round
	// (live) and those gone whose profile is still to delete (pending).
	swept   bool
	live    map[string]bool
	pending map[string]bool
	// planned are the profiles PlanInstanceProfile reported changes for, with the
	// role they were to hold: shadow mode's container decides a change once.
	planned map[string]string
}

type profileEntry struct {
	role    string
	expires time.Time
}

// InstanceProfileTTL is how long a profile seen holding its role is trusted
// without asking IAM again (Karpenter caches instance profiles as long).
const InstanceProfileTTL = 15 * time.Minute

// NewInstanceProfileCache returns an empty cache reading time from clock (nil: time.Now).
func NewInstanceProfileCache(clock func() time.Time) *InstanceProfileCache {
	if clock == nil {
		clock = time.Now
	}
	return &InstanceProfileCache{clock: clock, ttl: InstanceProfileTTL, entries: map[string]profileEntry{}, pending: map[string]bool{},
		planned: map[string]string{}}
}

func (c *InstanceProfileCache) holds(name, role string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok || !c.clock().Before(e.expires) {
		delete(c.entries, name)
		return false
	}
	return e.role == role
}

func (c *InstanceProfileCache) remember(name, role string) {
	c.mu.Lock()
	c.entries[name] = profileEntry{role: role, expires: c.clock().Add(c.ttl)}
	c.mu.Unlock()
}

// plan reports whether a change to make profile name hold role is still to be
// reported, and takes it as reported.
func (c *InstanceProfileCache) plan(name, role string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.planned[name] == role {
		return false
	}
	c.planned[name] = role
	return true
}

func (c *InstanceProfileCache) forget(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}

// profileTags are the tags of a managed profile: the class's tags under
// Karpenter's identity tags.
func (p *Provider) profileTags(nc *karpenter.EC2NodeClass) map[string]string {
	tags := map[string]string{}
	maps.Copy(tags, nc.Spec.Tags)
	tags[p.ownerTagKey()] = "owned"
	tags[TagEKSClusterName] = p.cfg.ClusterName
	tags[TagNodeClass] = nc.Name
	tags[TagRegion] = p.cfg.Region
	return tags
}

// managedBy reports whether a profile carries this cluster's and this class's
// identity tags: only then does Joiner change or delete it.
func (p *Provider) managedBy(ip *iamtypes.InstanceProfile, nodeClass string) bool {
	tags := map[string]string{}
	for _, t := range ip.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags[p.ownerTagKey()] == "owned" && tags[TagNodeClass] == nodeClass
}

// InstanceProfile returns the instance profile instances of the class launch
// with. spec.instanceProfile is used as given. With spec.role, the managed
// profile (InstanceProfileName) is created when missing, tagged, and made to
// hold the role; a profile seen holding it is trusted for
// InstanceProfileTTL. In DRY_RUN nothing is created: a missing profile is
// reported as a dry-run answer (IAM has no dry run, so the permission is not
// checked) and its name returned.
func (p *Provider) InstanceProfile(ctx context.Context, nc *karpenter.EC2NodeClass) (string, error) {
	if nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "" {
		return *nc.Spec.InstanceProfile, nil
	}
	role := roleName(nc.Spec.Role)
	if role == "" {
		return "", fmt.Errorf("EC2NodeClass %s: set spec.role or spec.instanceProfile", nc.Name)
	}
	name := InstanceProfileName(p.cfg.ClusterName, p.cfg.Region, nc.Name)
	if p.profiles.holds(name, role) {
		return name, nil
	}
	_, err, _ := p.profileFlight.Do(name+"\x00"+role, func() (any, error) {
		if p.profiles.holds(name, role) { // readied by the call this one waited for
			return nil, nil
		}
		p.mu.Lock()
		err, failed := p.profileErrs[name]
		p.mu.Unlock()
		if failed {
			// Asked once per invocation: every launch of a class would otherwise repeat it.
			return nil, err
		}
		if err := p.ensureProfile(ctx, nc, name, role); err != nil {
			err = fmt.Errorf("EC2NodeClass %s: instance profile %s for role %s: %w", nc.Name, name, role, err)
			p.mu.Lock()
			p.profileErrs[name] = err
			p.mu.Unlock()
			return nil, err
		}
		return nil, nil
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// roleName is the role's name: spec.role may be a name, a path/name or an ARN,
// and AddRoleToInstanceProfile takes the bare name.
func roleName(role string) string {
	if i := strings.LastIndex(role, "/"); i >= 0 {
		return role[i+1:]
	}
	return role
}

// ProfileChange is one IAM write that readying or collecting an EC2NodeClass's
// instance profile makes: shadow mode records these instead of making them.
type ProfileChange struct {
	// Operation is the IAM action: CreateInstanceProfile, AddRoleToInstanceProfile
	// or DeleteInstanceProfile.
	Operation string `json:"operation"`
	Profile   string `json:"profile"`
	NodeClass string `json:"nodeClass"`
	// Role is the role AddRoleToInstanceProfile gives the profile; Replaced the
	// one it held, removed first.
	Role     string `json:"role,omitempty"`
	Replaced string `json:"replaced,omitempty"`
}

func (c ProfileChange) String() string {
	s := c.Operation + " " + c.Profile
	if c.Role != "" {
		s += " role " + c.Role
	}
	if c.Replaced != "" {
		s += " replacing " + c.Replaced
	}
	return s
}

// PlanInstanceProfile returns the IAM writes InstanceProfile would make for the
// class now, reading IAM only: none for a class naming its own profile or one
// whose profile holds its role. It is shadow mode's: the changes for one
// profile and role are returned once per container (its InstanceProfileCache),
// as acting makes them once, not every round. Its error is the one
// InstanceProfile would return without writing (no role, no IAM client, a
// profile with Joiner's name that is not Joiner's).
func (p *Provider) PlanInstanceProfile(ctx context.Context, nc *karpenter.EC2NodeClass) ([]ProfileChange, error) {
	if nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "" {
		return nil, nil
	}
	role := roleName(nc.Spec.Role)
	if role == "" {
		return nil, fmt.Errorf("EC2NodeClass %s: set spec.role or spec.instanceProfile", nc.Name)
	}
	name := InstanceProfileName(p.cfg.ClusterName, p.cfg.Region, nc.Name)
	if p.profiles.holds(name, role) {
		return nil, nil
	}
	if p.api.IAM == nil {
		return nil, fmt.Errorf("EC2NodeClass %s: instance profile %s: no IAM client to manage it with", nc.Name, name)
	}
	ip, err := p.getProfile(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: instance profile %s: %w", nc.Name, name, err)
	}
	var changes []ProfileChange
	if ip == nil {
		changes = []ProfileChange{{Operation: "CreateInstanceProfile", Profile: name, NodeClass: nc.Name},
			{Operation: "AddRoleToInstanceProfile", Profile: name, NodeClass: nc.Name, Role: role}}
	} else {
		ch, err := p.roleChange(ip, nc.Name, role)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: instance profile %s for role %s: %w", nc.Name, name, role, err)
		}
		if ch == nil {
			p.profiles.remember(name, role)
			return nil, nil
		}
		changes = []ProfileChange{*ch}
	}
	if !p.profiles.plan(name, role) {
		return nil, nil
	}
	return changes, nil
}

// roleChange is the write that makes the profile hold role, nil when it does.
// A profile holding another role that lacks this cluster's and the class's tags
// is not Joiner's to change.
func (p *Provider) roleChange(ip *iamtypes.InstanceProfile, nodeClass, role string) (*ProfileChange, error) {
	held := ""
	if len(ip.Roles) > 0 {
		held = aws.ToString(ip.Roles[0].RoleName)
	}
	if held == role {
		return nil, nil
	}
	if !p.managedBy(ip, nodeClass) {
		return nil, fmt.Errorf("the profile exists, holds role %q and lacks this cluster's tags (%s=owned, %s=%s), so Joiner leaves it alone; delete it or name a profile in spec.instanceProfile",
			held, p.ownerTagKey(), TagNodeClass, nodeClass)
	}
	return &ProfileChange{Operation: "AddRoleToInstanceProfile", Profile: aws.ToString(ip.InstanceProfileName), NodeClass: nodeClass,
		Role: role, Replaced: held}, nil
}

func (p *Provider) ensureProfile(ctx context.Context, nc *karpenter.EC2NodeClass, name, role string) error {
	if p.api.IAM == nil {
		return errors.New("no IAM client to manage it with (the class names a role; name an existing profile in spec.instanceProfile instead)")
	}
	ip, err := p.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if ip == nil {
		if p.cfg.DryRun {
			p.recordDryRun(DryRunResult{Operation: "CreateInstanceProfile", Target: name, Code: CodeNotChecked,
				Message: "IAM has no dry run: the profile would be created holding role " + role}, nil)
			return nil
		}
		out, err := p.api.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name), Tags: iamTags(p.profileTags(nc)),
		})
		switch {
		case ErrorCode(err) == codeEntityAlreadyExists:
			// Another invocation won the race: use what it made.
			if ip, err = p.getProfile(ctx, name); err != nil {
				return err
			}
			if ip == nil {
				return errors.New("reported as existing but not found")
			}
		case err != nil:
			return wrap("CreateInstanceProfile", err)
		default:
			ip = out.InstanceProfile
			p.log.Info("created instance profile", "name", name, "nodeClass", nc.Name, "role", role)
		}
	}
	ch, err := p.roleChange(ip, nc.Name, role)
	if err != nil {
		return err
	}
	if ch == nil {
		p.profiles.remember(name, role)
		return nil
	}
	held := ch.Replaced
	if p.cfg.DryRun {
		p.recordDryRun(DryRunResult{Operation: "AddRoleToInstanceProfile", Target: name, Code: CodeNotChecked,
			Message: fmt.Sprintf("IAM has no dry run: role %s would replace %q", role, held)}, nil)
		return nil
	}
	if held != "" {
		// A profile holds one role: the class's role changed.
		if _, err := p.api.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: aws.String(held),
		}); err != nil && ErrorCode(err) != codeNoSuchEntity {
			return wrap("RemoveRoleFromInstanceProfile "+held, err)
		}
	}
	if _, err := p.api.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: aws.String(name), RoleName: aws.String(role),
	}); err != nil {
		if ErrorCode(err) == codeNoSuchEntity {
			return fmt.Errorf("role %s does not exist (create it, or fix spec.role): %w", role, err)
		}
		return wrap("AddRoleToInstanceProfile", err)
	}
	p.log.Info("instance profile holds the class's role", "name", name, "nodeClass", nc.Name, "role", role, "replaced", held)
	p.profiles.remember(name, role)
	return nil
}

// getProfile reads a profile; nil when it does not exist.
func (p *Provider) getProfile(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.api.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if ErrorCode(err) == codeNoSuchEntity {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("GetInstanceProfile", err)
	}
	return out.InstanceProfile, nil
}

// DeleteInstanceProfile deletes the instance profile Joiner manages for a
// class (when the class is deleted and no NodeClaim uses it any more): its
// role is removed, then the profile. A profile that does not exist is fine;
// one without this cluster's and class's tags is left alone. It reports
// whether a profile was deleted.
func (p *Provider) DeleteInstanceProfile(ctx context.Context, nodeClass string) (bool, error) {
	if p.api.IAM == nil {
		return false, nil
	}
	name := InstanceProfileName(p.cfg.ClusterName, p.cfg.Region, nodeClass)
	ip, err := p.getProfile(ctx, name)
	if err != nil || ip == nil {
		return false, err
	}
	if !p.managedBy(ip, nodeClass) {
		p.log.Warn("instance profile with Joiner's name lacks its tags; leaving it", "name", name, "nodeClass", nodeClass)
		return false, nil
	}
	return p.deleteProfile(ctx, ip, nodeClass)
}

// deleteProfile removes a managed profile's role, then the profile.
func (p *Provider) deleteProfile(ctx context.Context, ip *iamtypes.InstanceProfile, nodeClass string) (bool, error) {
	name := aws.ToString(ip.InstanceProfileName)
	if p.cfg.DryRun {
		p.recordDryRun(DryRunResult{Operation: "DeleteInstanceProfile", Target: name, Code: CodeNotChecked, Message: "IAM has no dry run"}, nil)
		return false, nil
	}
	for _, r := range ip.Roles {
		if _, err := p.api.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName,
		}); err != nil && ErrorCode(err) != codeNoSuchEntity {
			return false, wrap("RemoveRoleFromInstanceProfile "+aws.ToString(r.RoleName), err)
		}
	}
	if _, err := p.api.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && ErrorCode(err) != codeNoSuchEntity {
		return false, wrap("DeleteInstanceProfile "+name, err)
	}
	p.profiles.forget(name)
	p.log.Info("deleted instance profile", "name", name, "nodeClass", nodeClass)
	return true, nil
}

func iamTags(m map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(m))
	for _, t := range ec2Tags(m) { // sorted
		out = append(out, iamtypes.Tag{Key: t.Key, Value: t.Value})
	}
	return out
}
