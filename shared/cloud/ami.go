package cloud

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// AMI is a resolved image and what it can run on.
type AMI struct {
	ID   string
	Name string
	// Arch is amd64 or arm64.
	Arch string
	// Variant is set for alias AMIs: standard, nvidia or neuron. Images chosen
	// by id, name, tags or owner have no variant and fit any type of their arch.
	Variant      string
	CreationDate string
}

// Fits reports whether the image can boot the instance type.
func (a AMI) Fits(it *catalog.InstanceType) bool {
	if a.Arch != it.Arch {
		return false
	}
	if a.Variant == "" {
		return true
	}
	return a.Variant == variantFor(it)
}

func variantFor(it *catalog.InstanceType) string {
	switch {
	case it.GPU != nil && it.GPU.Manufacturer == "nvidia" && it.GPU.Count > 0:
		return amifamily.VariantNVIDIA
	case it.Accelerator != nil && it.Accelerator.Manufacturer == "aws":
		return amifamily.VariantNeuron
	}
	return amifamily.VariantStandard
}

// AMIs resolves the class's amiSelectorTerms, newest first. An alias reads the
// public SSM parameters for every architecture and variant (a missing
// parameter just means that combination does not exist); other terms query
// DescribeImages (id, name, owner, tags; a name without owner searches self and
// amazon, as Karpenter does).
func (p *Provider) AMIs(ctx context.Context, nc *karpenter.EC2NodeClass) ([]AMI, error) {
	terms := nc.Spec.AMISelectorTerms
	key := cacheKey(terms)
	p.mu.Lock()
	if a, ok := p.amis[key]; ok {
		p.mu.Unlock()
		return a, nil
	}
	p.mu.Unlock()
	if len(terms) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %s: amiSelectorTerms is empty", nc.Name)
	}
	var amis []AMI
	var err error
	if terms[0].Alias != "" {
		if len(terms) > 1 {
			return nil, fmt.Errorf("EC2NodeClass %s: an alias amiSelectorTerm must be the only term", nc.Name)
		}
		amis, err = p.aliasAMIs(ctx, nc.Name, terms[0].Alias)
	} else {
		amis, err = p.selectedAMIs(ctx, nc.Name, terms)
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.amis[key] = amis
	p.mu.Unlock()
	return amis, nil
}

func (p *Provider) aliasAMIs(ctx context.Context, class, alias string) ([]AMI, error) {
	a, err := amifamily.ParseAlias(alias)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", class, err)
	}
	if p.api.SSM == nil {
		return nil, fmt.Errorf("EC2NodeClass %s: alias %s needs an SSM client", class, alias)
	}
	cluster, err := p.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	if cluster.Version == "" {
		return nil, fmt.Errorf("EC2NodeClass %s: alias %s needs the cluster's Kubernetes version", class, alias)
	}
	root := p.cfg.PublicParameterRoot
	if root == "" {
		root = "/aws/service"
	}
	byID := map[string][]amifamily.ImageParameter{}
	var ids, tried []string
	for _, param := range a.Parameters(root, cluster.Version) {
		tried = append(tried, param.Path)
		id, err := p.parameter(ctx, param.Path)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: alias %s: %w", class, alias, err)
		}
		if id == "" {
			continue
		}
		if byID[id] == nil {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], param)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %s: alias %s resolved no image for Kubernetes %s (SSM parameters tried: %s)", class, alias, cluster.Version, strings.Join(tried, ", "))
	}
	images, err := p.describeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}})
	if err != nil {
		return nil, err
	}
	found := map[string]ec2types.Image{}
	for _, img := range images {
		found[aws.ToString(img.ImageId)] = img
	}
	var out []AMI
	for _, id := range ids {
		img, ok := found[id]
		if !ok {
			return nil, fmt.Errorf("EC2NodeClass %s: alias %s names image %s, which DescribeImages does not find", class, alias, id)
		}
		for _, param := range byID[id] {
			out = append(out, AMI{ID: id, Name: aws.ToString(img.Name), Arch: param.Arch, Variant: param.Variant, CreationDate: aws.ToString(img.CreationDate)})
		}
	}
	return out, nil
}

// parameter reads an SSM parameter; "" when it does not exist.
func (p *Provider) parameter(ctx context.Context, name string) (string, error) {
	p.mu.Lock()
	if v, ok := p.params[name]; ok {
		p.mu.Unlock()
		return v, nil
	}
	p.mu.Unlock()
	out, err := p.api.SSM.GetParameter(ctx, name)
	v := ""
	switch {
	case ErrorCode(err) == "ParameterNotFound":
	case err != nil:
		return "", err // it names the call and the parameter
	default:
		v = out.Value
	}
	p.mu.Lock()
	p.params[name] = v
	p.mu.Unlock()
	return v, nil
}

func (p *Provider) selectedAMIs(ctx context.Context, class string, terms []karpenter.AMISelectorTerm) ([]AMI, error) {
	seen := map[string]bool{}
	var out []AMI
	for i, t := range terms {
		if t.Alias != "" {
			return nil, fmt.Errorf("EC2NodeClass %s: an alias amiSelectorTerm must be the only term", class)
		}
		in := &ec2.DescribeImagesInput{Filters: tagFilters(t.Tags)}
		id := t.ID
		if t.SSMParameter != "" {
			if p.api.SSM == nil {
				return nil, fmt.Errorf("EC2NodeClass %s: amiSelectorTerms[%d].ssmParameter needs an SSM client", class, i)
			}
			v, err := p.parameter(ctx, t.SSMParameter)
			if err != nil {
				return nil, err
			}
			if v == "" {
				return nil, fmt.Errorf("EC2NodeClass %s: amiSelectorTerms[%d].ssmParameter %s does not exist", class, i, t.SSMParameter)
			}
			id = v
		}
		if id != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("image-id"), Values: []string{id}})
		}
		if t.Name != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
		}
		switch {
		case t.Owner != "":
			in.Owners = []string{t.Owner}
		case t.Name != "" && id == "":
			in.Owners = []string{"self", "amazon"}
		}
		if len(in.Filters) == 0 && len(in.Owners) == 0 {
			return nil, fmt.Errorf("EC2NodeClass %s: amiSelectorTerms[%d] is empty: give id, name, owner, tags or ssmParameter", class, i)
		}
		images, err := p.describeImages(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, img := range images {
			imgID := aws.ToString(img.ImageId)
			if seen[imgID] || (img.State != "" && img.State != ec2types.ImageStateAvailable) {
				continue
			}
			arch := ""
			switch img.Architecture {
			case ec2types.ArchitectureValuesX8664:
				arch = catalog.ArchAMD64
			case ec2types.ArchitectureValuesArm64:
				arch = catalog.ArchARM64
			default:
				p.log.Warn("skipping image with an architecture Joiner does not launch", "nodeClass", class, "image", imgID, "architecture", string(img.Architecture))
				continue
			}
			seen[imgID] = true
			out = append(out, AMI{ID: imgID, Name: aws.ToString(img.Name), Arch: arch, CreationDate: aws.ToString(img.CreationDate)})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %s: amiSelectorTerms %s matched no available amd64 or arm64 image", class, cacheKey(terms))
	}
	// Newest first (RFC 3339 dates sort as strings), then by ID for a stable order.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].CreationDate != out[j].CreationDate {
			return out[i].CreationDate > out[j].CreationDate
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (p *Provider) describeImages(ctx context.Context, in *ec2.DescribeImagesInput) ([]ec2types.Image, error) {
	var out []ec2types.Image
	pg := ec2.NewDescribeImagesPaginator(p.api.EC2, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("DescribeImages", err)
		}
		out = append(out, page.Images...)
	}
	return out, nil
}

// amiFor returns the newest image that fits the type.
func amiFor(amis []AMI, it *catalog.InstanceType) (AMI, bool) {
	for _, a := range amis {
		if a.Fits(it) {
			return a, true
		}
	}
	return AMI{}, false
}
