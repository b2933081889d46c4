package awssim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
)

// DefaultClusterName is the cluster of DefaultSeed when no other is named.
const DefaultClusterName = "joiner-sim"

// DefaultVPCID is the VPC of seeded subnets and security groups that name none.
const DefaultVPCID = "vpc-0123456789abcdef0"

// DefaultKubernetesVersions are the versions whose public AMI parameters are seeded.
var DefaultKubernetesVersions = []string{"1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37"}

// Release names of the seeded public AMIs, used in their versioned parameter
// paths (al2023@v20261101, bottlerocket@v1.50.0).
const (
	EKSAMIRelease          = "v20261101"
	BottlerocketAMIRelease = "1.50.0"
)

var publicAMIDate = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// EKSAMIOwner is the account that owns the EKS-optimized AMIs.
const EKSAMIOwner = "602401143452"

// DefaultSeed is a small, ready-to-use account for cluster clusterName: one VPC,
// a private subnet in each of us-east-1a/b/c and a node security group, all
// tagged karpenter.sh/discovery=<cluster>; an ACTIVE EKS cluster; a custom
// worker AMI owned by the account; the node role KarpenterNodeRole-<cluster>
// (no instance profile: Joiner creates that); and (as in every seed) the public AMI
// parameters of DefaultKubernetesVersions.
func DefaultSeed(clusterName string) Seed {
	disc := func(name string, extra map[string]string) map[string]string {
		t := map[string]string{"karpenter.sh/discovery": clusterName, "Name": name}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	var subnets []Subnet
	for i, z := range []string{"a", "b", "c"} {
		subnets = append(subnets, Subnet{
			ID:   fmt.Sprintf("subnet-0%s0000000000000%s1", z, z),
			Zone: DefaultRegion + z,
			CIDR: fmt.Sprintf("10.0.%d.0/20", 16*i),
			Tags: disc(fmt.Sprintf("%s-private-%s", clusterName, DefaultRegion+z),
				map[string]string{"kubernetes.io/role/internal-elb": "1"}),
		})
	}
	return Seed{
		Subnets: subnets,
		SecurityGroups: []SecurityGroup{
			{ID: "sg-0d0000000000000d1", Name: clusterName + "-node", Description: "EKS node shared security group",
				Tags: disc(clusterName+"-node", nil)},
			{ID: "sg-0d0000000000000d2", Name: "eks-cluster-sg-" + clusterName, Description: "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.",
				Tags: map[string]string{"kubernetes.io/cluster/" + clusterName: "owned", "aws:eks:cluster-name": clusterName}},
		},
		Images: []Image{
			{ID: "ami-0c0ffee00000000a1", Name: clusterName + "-custom-worker-x86_64", Description: "custom worker image (amiFamily: Custom)",
				Architecture: "x86_64", CreationDate: "2026-10-01T00:00:00Z", Tags: map[string]string{"karpenter.sh/discovery": clusterName}},
			{ID: "ami-0c0ffee00000000a2", Name: clusterName + "-custom-worker-gpu-x86_64", Description: "custom GPU worker image (amiFamily: Custom)",
				Architecture: "x86_64", CreationDate: "2026-10-01T00:00:00Z", Tags: map[string]string{"karpenter.sh/discovery": clusterName, "gpu": "true"}},
		},
		// The node role Karpenter's getting-started guide creates; Joiner makes the
		// instance profile that holds it.
		Roles: []Role{{Name: NodeRoleName(clusterName)}},
		Clusters: []Cluster{{Name: clusterName, Version: DefaultKubernetesVersions[len(DefaultKubernetesVersions)-1],
			SubnetIDs: []string{subnets[0].ID, subnets[1].ID, subnets[2].ID}, SecurityGroupIDs: []string{"sg-0d0000000000000d1"},
			ClusterSGID: "sg-0d0000000000000d2"}},
	}
}

// NodeRoleName is the node role DefaultSeed creates for a cluster,
// KarpenterNodeRole-<cluster> as Karpenter's getting-started guide names it.
func NodeRoleName(clusterName string) string { return "KarpenterNodeRole-" + clusterName }

// LoadSeed reads a JSON state file. Unknown fields are an error, so a typo
// in a seed does not silently drop state.
func LoadSeed(path string) (*Seed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("awssim: state file: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var s Seed
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("awssim: state file %s: %w", path, jsonerr.Describe(nil, err))
	}
	return &s, nil
}

// fillCluster completes a seeded cluster with what EKS would report.
func fillCluster(c *Cluster, w *world, now time.Time) {
	h := sha256.Sum256([]byte(w.account + "/" + w.region + "/" + c.Name))
	if c.Version == "" {
		c.Version = DefaultKubernetesVersions[len(DefaultKubernetesVersions)-1]
	}
	if c.Endpoint == "" {
		c.Endpoint = fmt.Sprintf("https://%s.gr7.%s.eks.amazonaws.com", strings.ToUpper(hex.EncodeToString(h[:16])), w.region)
	}
	if c.CertificateAuthority == "" {
		pem := "-----BEGIN CERTIFICATE-----\n" + base64.StdEncoding.EncodeToString([]byte("awssim placeholder CA for "+c.Name)) + "\n-----END CERTIFICATE-----\n"
		c.CertificateAuthority = base64.StdEncoding.EncodeToString([]byte(pem))
	}
	if c.Status == "" {
		c.Status = "ACTIVE"
	}
	if c.ServiceIPv4CIDR == "" {
		c.ServiceIPv4CIDR = "10.100.0.0/16"
	}
	if c.IPFamily == "" {
		c.IPFamily = "ipv4"
	}
	if c.RoleARN == "" {
		c.RoleARN = fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster", w.account, c.Name)
	}
	if c.VpcID == "" {
		c.VpcID = DefaultVPCID
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.Tags = cloneTags(c.Tags)
}

// PublicImageID is the ID of the seeded public image named name (the EKS-optimized
// and Bottlerocket images of publicAMIs): stable across runs, so a test can write
// the image a node was launched from before the simulator starts.
func PublicImageID(name string) string {
	h := sha256.Sum256([]byte(name))
	return "ami-0" + hex.EncodeToString(h[:8])
}

// publicAMI is one seeded public image and the SSM parameters naming it.
type publicAMI struct {
	image  Image
	params []string
}

// publicAMIs builds the EKS-optimized and Bottlerocket images and their
// parameter paths for each Kubernetes version, as Karpenter resolves amiFamily
// aliases (al2023@latest, al2@latest, bottlerocket@latest, and @<release>).
func publicAMIs(versions []string) []publicAMI {
	var out []publicAMI
	// The EKS-optimized images have one 20 GiB root volume; Bottlerocket a 2 GiB
	// OS volume and a 20 GiB data volume (/dev/xvdb), as the published AMIs do.
	eksDevices := []ImageBlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 20}}
	brDevices := []ImageBlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 2}, {DeviceName: "/dev/xvdb", VolumeSizeGiB: 20}}
	devices := eksDevices
	add := func(name, arch, desc string, params ...string) {
		img := Image{
			ID: PublicImageID(name), Name: name, Description: desc, Architecture: arch,
			OwnerID: EKSAMIOwner, OwnerAlias: "amazon", State: "available", Public: true,
			CreationDate: publicAMIDate.Format(time.RFC3339), BlockDevices: slices.Clone(devices),
		}
		fillImageDevices(&img, 0)
		out = append(out, publicAMI{image: img, params: params})
	}
	al2023, al2, bottlerocket := amifamily.AL2023{}, amifamily.AL2{}, amifamily.Bottlerocket{}
	for _, k := range versions {
		for _, arch := range []string{"x86_64", "arm64"} {
			for _, variant := range []string{amifamily.VariantStandard, amifamily.VariantNVIDIA, amifamily.VariantNeuron} {
				if variant == amifamily.VariantNeuron && arch == "arm64" {
					continue
				}
				name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, k, EKSAMIRelease)
				add(name, arch, fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, variant: %s)", k, variant),
					familyParameters(al2023, k, EKSAMIRelease, arch, variant)...)
			}
		}
		for _, v := range []struct{ arch, variant, prefix string }{
			{"x86_64", amifamily.VariantStandard, "amazon-eks-node"},
			{"x86_64", amifamily.VariantNVIDIA, "amazon-eks-gpu-node"},
			{"arm64", amifamily.VariantStandard, "amazon-eks-arm64-node"},
		} {
			name := fmt.Sprintf("%s-%s-%s", v.prefix, k, EKSAMIRelease)
			add(name, v.arch, fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)", k),
				familyParameters(al2, k, EKSAMIRelease, v.arch, v.variant)...)
		}
		devices = brDevices
		for _, v := range []struct{ variant, flavor string }{{amifamily.VariantStandard, ""}, {amifamily.VariantNVIDIA, "-nvidia"}} {
			for _, arch := range []string{"x86_64", "arm64"} {
				name := fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s", k, v.flavor, arch, BottlerocketAMIRelease)
				add(name, arch, "Bottlerocket OS for Kubernetes "+k+v.flavor,
					familyParameters(bottlerocket, k, BottlerocketAMIRelease, arch, v.variant)...)
			}
		}
		devices = eksDevices
	}
	return out
}

// publicParameterRoot is where AWS publishes its public SSM parameters.
const publicParameterRoot = "/aws/service"

// familyParameters returns the "latest" parameter and the one pinned to release
// that the family's alias reads for the image of an EC2 architecture and a
// variant. The paths come from amifamily, so the simulator publishes each image
// exactly where the product's alias resolution looks for it.
func familyParameters(f amifamily.Family, k8sVersion, release, arch, variant string) []string {
	kubeArch := map[string]string{"x86_64": "amd64", "arm64": "arm64"}[arch]
	var out []string
	for _, version := range []string{"latest", release} {
		params := f.ImageParameters(publicParameterRoot, k8sVersion, version)
		i := slices.IndexFunc(params, func(p amifamily.ImageParameter) bool { return p.Arch == kubeArch && p.Variant == variant })
		if i < 0 {
			panic(fmt.Sprintf("awssim: amiFamily %s has no %s %s image", f.Name(), arch, variant))
		}
		out = append(out, params[i].Path)
	}
	return out
}

// fillImageDevices gives an image its root device and snapshots: the root
// device defaults to /dev/xvda, and an image without snapshots gets one of
// rootGiB (when positive) on its root device. Snapshot IDs derive from the
// image ID, so a seed reads the same every time.
func fillImageDevices(img *Image, rootGiB int) {
	if img.RootDeviceName == "" {
		img.RootDeviceName = "/dev/xvda"
		if len(img.BlockDevices) > 0 {
			img.RootDeviceName = img.BlockDevices[0].DeviceName
		}
	}
	if len(img.BlockDevices) == 0 && rootGiB > 0 {
		img.BlockDevices = []ImageBlockDevice{{DeviceName: img.RootDeviceName, VolumeSizeGiB: rootGiB}}
	}
	img.BlockDevices = slices.Clone(img.BlockDevices)
	for i := range img.BlockDevices {
		if img.BlockDevices[i].SnapshotID == "" {
			h := sha256.Sum256([]byte(img.ID + img.BlockDevices[i].DeviceName))
			img.BlockDevices[i].SnapshotID = "snap-0" + hex.EncodeToString(h[:8])
		}
	}
}
