package cloud

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// loadClass reads a testdata EC2NodeClass, replacing AMI_* markers with the
// seeded image IDs.
func (e *env) loadClass(name string) *karpenter.EC2NodeClass {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	e.must(err)
	s := strings.NewReplacer("AMI_X86", e.amiX86, "AMI_ARM", e.amiARM, "AMI_GPU", e.amiGPU).Replace(string(data))
	nc := &karpenter.EC2NodeClass{}
	if err := yaml.UnmarshalStrict([]byte(s), nc); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	return nc
}

func subnetIDs(s []Subnet) []string {
	var ids []string
	for _, x := range s {
		ids = append(ids, x.ID)
	}
	return ids
}

func TestDiscoverSubnets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		p := e.provider()
		tagged := []string{e.subnets["us-east-1a"], e.subnets["us-east-1b"], e.subnets["us-east-1c"]}

		got, err := p.Subnets(ctx, []karpenter.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(subnetIDs(got), tagged) || got[0].Zone != "us-east-1a" || got[2].Zone != "us-east-1c" {
			t.Errorf("by tag: got %+v, want %v in zone order", got, tagged)
		}
		if got[0].AvailableIPs <= 0 {
			t.Errorf("available IP count not read: %+v", got[0])
		}
		if z := Zones(got); !slices.Equal(z, []string{"us-east-1a", "us-east-1b", "us-east-1c"}) {
			t.Errorf("zones with subnets = %v", z)
		}

		got, err = p.Subnets(ctx, []karpenter.SubnetSelectorTerm{{Tags: map[string]string{"kubernetes.io/role/internal-elb": "*"}}})
		if err != nil || !slices.Equal(subnetIDs(got), tagged) {
			t.Errorf(`"*" tag value: got %v, %v; want %v`, subnetIDs(got), err, tagged)
		}

		got, err = p.Subnets(ctx, []karpenter.SubnetSelectorTerm{{ID: e.other}, {Tags: map[string]string{"karpenter.sh/discovery": testCluster}}})
		if err != nil || len(got) != 4 || got[3].ID != e.other || got[3].Zone != "us-east-1d" {
			t.Errorf("id term ORed with tag term: got %+v, %v", got, err)
		}

		// Within one term, tags and id are ANDed: the untagged subnet's id with the tag matches nothing.
		_, err = p.Subnets(ctx, []karpenter.SubnetSelectorTerm{{ID: e.other, Tags: map[string]string{"karpenter.sh/discovery": testCluster}}})
		if err == nil || !strings.Contains(err.Error(), "matched no available subnet") {
			t.Errorf("want a no-match error, got %v", err)
		}
		if _, err := p.Subnets(ctx, []karpenter.SubnetSelectorTerm{{}}); err == nil || !strings.Contains(err.Error(), "subnetSelectorTerms[0] is empty") {
			t.Errorf("empty term: %v", err)
		}
	})
}

func TestDiscoverSubnetsCachedPerInvocation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		terms := []karpenter.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}}
		p := e.provider()
		for range 3 {
			if _, err := p.Subnets(ctx, terms); err != nil {
				t.Fatal(err)
			}
		}
		if n := e.proxy.count("DescribeSubnets"); n != 1 {
			t.Errorf("DescribeSubnets called %d times in one invocation, want 1", n)
		}
		if _, err := e.provider().Subnets(ctx, terms); err != nil {
			t.Fatal(err)
		}
		if n := e.proxy.count("DescribeSubnets"); n != 2 {
			t.Errorf("a new invocation must discover again: %d calls", n)
		}
	})
}

func TestDiscoverSecurityGroups(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		p := e.provider()
		cases := []struct {
			name  string
			terms []karpenter.SecurityGroupSelectorTerm
			want  []string
		}{
			{"tags", []karpenter.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}}, []string{e.sgNodes}},
			{"id", []karpenter.SecurityGroupSelectorTerm{{ID: e.sgNamed}}, []string{e.sgNamed}},
			{"name", []karpenter.SecurityGroupSelectorTerm{{Name: "joiner-named"}}, []string{e.sgNamed}},
			{"any tag value", []karpenter.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "*"}}}, []string{e.sgNodes}},
		}
		for _, tc := range cases {
			got, err := p.SecurityGroups(ctx, tc.terms)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			var ids []string
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.name, ids, tc.want)
			}
		}
		both, err := p.SecurityGroups(ctx, []karpenter.SecurityGroupSelectorTerm{{Name: "joiner-named"}, {ID: e.sgNodes}})
		if err != nil || len(both) != 2 {
			t.Errorf("ORed terms: %+v %v", both, err)
		}
		if _, err := p.SecurityGroups(ctx, []karpenter.SecurityGroupSelectorTerm{{Name: "no-such-group"}}); err == nil {
			t.Error("a name that matches nothing must be an error")
		}
	})
}

func TestDiscoverAMIsBySelector(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		p := e.provider()
		class := func(terms ...karpenter.AMISelectorTerm) *karpenter.EC2NodeClass {
			nc := &karpenter.EC2NodeClass{}
			nc.Name = "c"
			nc.Spec.AMISelectorTerms = terms
			return nc
		}
		byID, err := p.AMIs(ctx, class(karpenter.AMISelectorTerm{ID: e.amiARM}))
		if err != nil || len(byID) != 1 || byID[0].ID != e.amiARM || byID[0].Arch != "arm64" || byID[0].Variant != "" {
			t.Fatalf("by id: %+v %v", byID, err)
		}
		byTags, err := p.AMIs(ctx, class(karpenter.AMISelectorTerm{Tags: map[string]string{"joiner-test/role": "worker"}}))
		if err != nil || len(byTags) != 2 {
			t.Fatalf("by tags: %+v %v", byTags, err)
		}
		archs := []string{byTags[0].Arch, byTags[1].Arch}
		slices.Sort(archs)
		if !slices.Equal(archs, []string{"amd64", "arm64"}) {
			t.Errorf("by tags: archs %v", archs)
		}
		name := e.instanceImageName(e.amiX86)
		byName, err := p.AMIs(ctx, class(karpenter.AMISelectorTerm{Name: name}))
		if err != nil || len(byName) != 1 || byName[0].ID != e.amiX86 {
			t.Fatalf("by name %s (owners self, amazon): %+v %v", name, byName, err)
		}
		byOwner, err := p.AMIs(ctx, class(karpenter.AMISelectorTerm{Owner: "amazon", Name: "al2023-ami-2023*"}))
		if err != nil || len(byOwner) < 2 {
			t.Fatalf("by owner and name pattern: %d images, %v", len(byOwner), err)
		}
		for i := 1; i < len(byOwner); i++ {
			if byOwner[i-1].CreationDate < byOwner[i].CreationDate {
				t.Fatalf("images not newest first: %s before %s", byOwner[i-1].CreationDate, byOwner[i].CreationDate)
			}
		}
		if _, err := p.AMIs(ctx, class(karpenter.AMISelectorTerm{Tags: map[string]string{"joiner-test/role": "nobody"}})); err == nil {
			t.Error("tags matching nothing must be an error")
		}
		if _, err := p.AMIs(ctx, class(karpenter.AMISelectorTerm{Alias: "al2023@latest"}, karpenter.AMISelectorTerm{ID: e.amiX86})); err == nil {
			t.Error("an alias mixed with other terms must be refused")
		}
	})
}

func (e *env) instanceImageName(id string) string {
	e.t.Helper()
	in := ec2DescribeImagesByID{id}.input()
	out, err := e.ec2.DescribeImages(context.Background(), &in)
	e.must(err)
	return *out.Images[0].Name
}

func TestAliasResolution(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cases := []struct {
			alias string
			want  map[string]string // arch/variant → image
		}{
			{"al2023@latest", map[string]string{"amd64/standard": e.amiX86, "arm64/standard": e.amiARM, "amd64/nvidia": e.amiGPU}},
			// Bottlerocket's x86_64 standard image also runs Neuron instances (Karpenter's variants).
			{"bottlerocket@latest", map[string]string{"amd64/standard": e.amiX86, "amd64/neuron": e.amiX86, "arm64/standard": e.amiARM, "amd64/nvidia": e.amiGPU}},
			{"al2@latest", map[string]string{"amd64/standard": e.amiX86}},
			{"al2023@v20240807", map[string]string{"amd64/standard": e.amiGPU}},
		}
		for _, tc := range cases {
			p := e.provider()
			nc := &karpenter.EC2NodeClass{}
			nc.Name = "alias"
			nc.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{Alias: tc.alias}}
			amis, err := p.AMIs(ctx, nc)
			if err != nil {
				t.Errorf("%s: %v", tc.alias, err)
				continue
			}
			got := map[string]string{}
			for _, a := range amis {
				got[a.Arch+"/"+a.Variant] = a.ID
			}
			if len(got) != len(tc.want) {
				t.Errorf("%s: got %v, want %v", tc.alias, got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %s = %q, want %q", tc.alias, k, got[k], v)
				}
			}
		}
		p := e.provider()
		nc := &karpenter.EC2NodeClass{}
		nc.Name = "pinned"
		nc.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{Alias: "bottlerocket@v9.9.9"}}
		_, err := p.AMIs(ctx, nc)
		if err == nil || !strings.Contains(err.Error(), e.paramRoot+"/bottlerocket/aws-k8s-1.30/x86_64/9.9.9/image_id") {
			t.Errorf("an alias without parameters must fail naming the paths tried: %v", err)
		}
		nc.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{Alias: "ubuntu@latest"}}
		if _, err := e.provider().AMIs(ctx, nc); err == nil || !strings.Contains(err.Error(), "unknown family") {
			t.Errorf("unknown alias family: %v", err)
		}
	})
}

func TestDiscoverInstanceTypesAndOfferings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		p := e.provider()
		types, err := p.InstanceTypes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(types) < 300 {
			t.Fatalf("only %d instance types discovered", len(types))
		}
		var g6 *struct{ name string }
		for _, it := range types {
			if it.Name == "g6.xlarge" {
				g6 = &struct{ name string }{it.Name}
				if it.GPU == nil || it.GPU.Name != "l4" || it.GPU.Manufacturer != "nvidia" || it.GPU.Count != 1 || it.VCPU != 4 || it.MemoryMiB != 16384 {
					t.Errorf("g6.xlarge facts: %+v gpu %+v", it, it.GPU)
				}
			}
		}
		if g6 == nil {
			t.Error("g6.xlarge not discovered")
		}
		offered, err := p.offerings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !offered["m6i.large"]["us-east-1a"] || !offered["m6i.large"]["us-east-1c"] {
			t.Errorf("m6i.large offerings: %v", offered["m6i.large"])
		}
	})
}
