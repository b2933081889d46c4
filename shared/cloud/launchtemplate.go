package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// LaunchTemplatePrefix starts the name of every launch template Joiner
// creates: joiner/<cluster>/<hash of the template's content>.
const LaunchTemplatePrefix = "joiner/"

// Tag keys Joiner writes.
const (
	TagNodePool  = karpenter.NodePoolLabelKey
	TagNodeClaim = karpenter.NodeClaimLabelKey
	TagNodeClass = karpenter.NodeClassLabelKey
	TagName      = "Name"
	// TagEKSClusterName is the cluster tag Karpenter puts on every instance and lists
	// its instances by (garbage collection, NodeClaim adoption): written so a cluster
	// can go back from Joiner to Karpenter with its nodes.
	TagEKSClusterName = "eks:eks-cluster-name"
	// TagManagedBy marks launch templates Joiner created, for clean-up.
	TagManagedBy = "joiner.dev/managed-by"
)

// blockDevices converts the class's mappings to launch template form.
func blockDevices(family amifamily.Family, in []*karpenter.BlockDeviceMapping) ([]ec2types.LaunchTemplateBlockDeviceMappingRequest, error) {
	if len(in) == 0 {
		in = family.DefaultBlockDeviceMappings()
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for i, m := range in {
		if m == nil || m.DeviceName == nil || *m.DeviceName == "" {
			return nil, fmt.Errorf("blockDeviceMappings[%d]: deviceName is required", i)
		}
		r := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted,
				KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID,
			}
			if e.VolumeType != nil {
				ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.VolumeSize != nil {
				gib := (e.VolumeSize.Value() + (1<<30 - 1)) >> 30
				if gib <= 0 || gib > 65536 {
					return nil, fmt.Errorf("blockDeviceMappings[%d]: volumeSize %s is out of range", i, e.VolumeSize.String())
				}
				ebs.VolumeSize = aws.Int32(int32(gib))
			}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			r.Ebs = ebs
		}
		out = append(out, r)
	}
	return out, nil
}

// metadataOptions is IMDSv2 required with a hop limit of 1 unless the class
// says otherwise.
func metadataOptions(m *karpenter.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	o := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
		HttpPutResponseHopLimit: aws.Int32(1),
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled,
	}
	if m == nil {
		return o
	}
	if m.HTTPEndpoint != nil {
		o.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPTokens != nil {
		o.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	if m.HTTPPutResponseHopLimit != nil {
		o.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPProtocolIPv6 != nil {
		o.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	return o
}

// templateSpec is one launch template a launch needs.
type templateSpec struct {
	name string
	data *ec2types.RequestLaunchTemplateData
	ami  AMI
}

// buildTemplate renders user data and assembles the launch template data;
// its name hashes the whole content, so any change makes a new template and
// equal content reuses the existing one.
func (p *Provider) buildTemplate(nc *karpenter.EC2NodeClass, family amifamily.Family, ami AMI, userData, profile string, groups []SecurityGroup) (templateSpec, error) {
	bdm, err := blockDevices(family, nc.Spec.BlockDeviceMappings)
	if err != nil {
		return templateSpec{}, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	sgIDs := make([]string, 0, len(groups))
	for _, g := range groups {
		sgIDs = append(sgIDs, g.ID)
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(ami.ID),
		UserData:            aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)},
		MetadataOptions:     metadataOptions(nc.Spec.MetadataOptions),
		BlockDeviceMappings: bdm,
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(nc.Spec.DetailedMonitoring != nil && *nc.Spec.DetailedMonitoring)},
	}
	if nc.Spec.AssociatePublicIPAddress != nil {
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: nc.Spec.AssociatePublicIPAddress, Groups: sgIDs,
		}}
	} else {
		data.SecurityGroupIds = sgIDs
	}
	// The network interface a launch creates carries the ownership tag from
	// creation, so the functions' role can require aws:RequestTag on it as on the
	// instance (Karpenter's reference policy does the same).
	data.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{{
		ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: ec2Tags(p.templateTags(nc)),
	}}
	return p.namedTemplate(nc, data, ami)
}

// namedTemplate names a template after a hash of its whole content.
func (p *Provider) namedTemplate(nc *karpenter.EC2NodeClass, data *ec2types.RequestLaunchTemplateData, ami AMI) (templateSpec, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return templateSpec{}, err
	}
	sum := sha256.Sum256(append([]byte(nc.Name+"\x00"), raw...))
	return templateSpec{name: LaunchTemplatePrefix + p.cfg.ClusterName + "/" + hex.EncodeToString(sum[:10]), data: data, ami: ami}, nil
}

// templateTags are the tags a template gives what a launch creates besides the
// instance and its volumes (tagged by the fleet request): the ownership tag and
// the class, the same for every NodeClaim so that launches share templates.
func (p *Provider) templateTags(nc *karpenter.EC2NodeClass) map[string]string {
	return map[string]string{p.ownerTagKey(): "owned", TagNodeClass: nc.Name, TagManagedBy: "joiner"}
}

// spotTemplate is t for spot launches: it also tags the spot instance request.
// EC2 refuses spot-instances-request tags in a launch that creates no spot
// request (InvalidParameterValue), so on-demand launches keep using t.
func (p *Provider) spotTemplate(nc *karpenter.EC2NodeClass, t templateSpec) (templateSpec, error) {
	data := *t.data
	data.TagSpecifications = append(slices.Clone(t.data.TagSpecifications), ec2types.LaunchTemplateTagSpecificationRequest{
		ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: ec2Tags(p.templateTags(nc)),
	})
	return p.namedTemplate(nc, &data, t.ami)
}

// ensureTemplate returns the ID of the named launch template, creating it when
// it does not exist yet (a concurrent creator winning the race is fine). In
// DRY_RUN the creation is only checked; the name is returned without an ID.
func (p *Provider) ensureTemplate(ctx context.Context, nc *karpenter.EC2NodeClass, t templateSpec, dry *[]DryRunResult) (string, error) {
	if id, ok := p.cachedTemplate(t.name); ok {
		return id, nil
	}
	if p.cfg.DryRun {
		return p.createTemplate(ctx, nc, t, dry)
	}
	// Concurrent launches of one class need the template once, not a creation each.
	v, err, _ := p.templateFlight.Do(t.name, func() (any, error) { return p.createTemplate(ctx, nc, t, dry) })
	id, _ := v.(string)
	return id, err
}

// cachedTemplate is the ID of a launch template this container found or created.
func (p *Provider) cachedTemplate(name string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.templates[name]
	return id, ok
}

// createTemplate finds or creates the named launch template.
func (p *Provider) createTemplate(ctx context.Context, nc *karpenter.EC2NodeClass, t templateSpec, dry *[]DryRunResult) (string, error) {
	if id, ok := p.cachedTemplate(t.name); ok {
		return id, nil
	}
	id, err := p.findTemplate(ctx, t.name)
	if err != nil || id != "" {
		return id, err
	}
	in := &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(t.name),
		LaunchTemplateData: t.data,
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: ec2Tags(map[string]string{
				p.ownerTagKey(): "owned", TagNodeClass: nc.Name, TagManagedBy: "joiner",
			}),
		}},
		DryRun: aws.Bool(p.cfg.DryRun),
	}
	out, err := p.api.EC2.CreateLaunchTemplate(ctx, in)
	if p.cfg.DryRun {
		r, ok := dryRunOutcome("CreateLaunchTemplate", t.name, err)
		if !ok {
			return "", wrap("CreateLaunchTemplate (dry run) "+t.name, err)
		}
		p.recordDryRun(r, dry)
		return "", nil
	}
	switch {
	case ErrorCode(err) == codeLTNameExists:
		id, err = p.findTemplate(ctx, t.name)
		if err == nil && id == "" {
			err = fmt.Errorf("launch template %s reported as existing but not found", t.name)
		}
		return id, err
	case err != nil:
		return "", wrap("CreateLaunchTemplate "+t.name, err)
	}
	id = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	p.log.Info("created launch template", "name", t.name, "id", id, "nodeClass", nc.Name, "image", t.ami.ID)
	p.mu.Lock()
	p.templates[t.name] = id
	p.mu.Unlock()
	return id, nil
}

func (p *Provider) findTemplate(ctx context.Context, name string) (string, error) {
	// A name filter answers "none" instead of failing with NotFound.
	out, err := p.api.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: []string{name}}},
	})
	if err != nil {
		return "", wrap("DescribeLaunchTemplates "+name, err)
	}
	for _, lt := range out.LaunchTemplates {
		if aws.ToString(lt.LaunchTemplateName) == name {
			id := aws.ToString(lt.LaunchTemplateId)
			p.mu.Lock()
			p.templates[name] = id
			p.mu.Unlock()
			return id, nil
		}
	}
	return "", nil
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func tagMap(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func (p *Provider) recordDryRun(r DryRunResult, into *[]DryRunResult) {
	p.mu.Lock()
	p.dryRuns = append(p.dryRuns, r)
	p.mu.Unlock()
	if into != nil {
		*into = append(*into, r)
	}
	p.log.Info("dry run", "operation", r.Operation, "target", r.Target, "allowed", r.Allowed, "permissionMissing", r.PermissionMissing, "code", r.Code)
}

// DryRuns returns every dry-run answer this provider received, in order.
func (p *Provider) DryRuns() []DryRunResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.dryRuns)
}

// DeleteLaunchTemplates deletes the launch templates Joiner created for an
// EC2NodeClass (when the class is deleted or its templates are superseded),
// except those named in keep. Only templates carrying this cluster's ownership
// tag, Joiner's managed-by tag and the class tag are considered. It returns
// the names deleted (in DRY_RUN: the names checked; see DryRuns).
func (p *Provider) DeleteLaunchTemplates(ctx context.Context, nodeClass string, keep ...string) ([]string, error) {
	pg := ec2.NewDescribeLaunchTemplatesPaginator(p.api.EC2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + p.ownerTagKey()), Values: []string{"owned"}},
			{Name: aws.String("tag:" + TagManagedBy), Values: []string{"joiner"}},
			{Name: aws.String("tag:" + TagNodeClass), Values: []string{nodeClass}},
		},
	})
	var deleted []string
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return deleted, wrap("DescribeLaunchTemplates", err)
		}
		for _, lt := range out.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			tags := tagMap(lt.Tags)
			// Checked again: a lenient endpoint must not widen what Joiner deletes.
			if slices.Contains(keep, name) || !strings.HasPrefix(name, LaunchTemplatePrefix+p.cfg.ClusterName+"/") ||
				tags[p.ownerTagKey()] != "owned" || tags[TagNodeClass] != nodeClass || tags[TagManagedBy] != "joiner" {
				continue
			}
			_, err := p.api.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId, DryRun: aws.Bool(p.cfg.DryRun)})
			if p.cfg.DryRun {
				r, ok := dryRunOutcome("DeleteLaunchTemplate", name, err)
				if !ok {
					return deleted, wrap("DeleteLaunchTemplate (dry run) "+name, err)
				}
				p.recordDryRun(r, nil)
				deleted = append(deleted, name)
				continue
			}
			if err != nil && ErrorCode(err) != "InvalidLaunchTemplateId.NotFound" {
				return deleted, wrap("DeleteLaunchTemplate "+name, err)
			}
			p.mu.Lock()
			delete(p.templates, name)
			p.mu.Unlock()
			deleted = append(deleted, name)
		}
	}
	if len(deleted) > 0 {
		p.log.Info("deleted launch templates", "nodeClass", nodeClass, "templates", deleted, "dryRun", p.cfg.DryRun)
	}
	return deleted, nil
}
