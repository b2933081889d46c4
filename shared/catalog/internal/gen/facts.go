package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// families are the instance families the embedded catalog carries: the ones the
// foundation issue names plus close relatives users pick alongside them (flex,
// AMD and newer Graviton variants, network-optimised c6gn, older and
// fractional GPUs). Every size the source lists is kept.
var families = []string{
	"t3", "t3a", "t4g",
	"m5", "m6i", "m6a", "m6g", "m7i", "m7i-flex", "m7a", "m7g", "m8g",
	"c5", "c6i", "c6a", "c6g", "c6gn", "c7i", "c7a", "c7g", "c8g",
	"r5", "r6i", "r6a", "r6g", "r7i", "r7a", "r7g", "r8g",
	"g4dn", "g5", "g6", "g6e", "g6f", "p4d", "p5", "inf2",
}

// bandwidthMbps is the baseline network bandwidth per type, in Mbps, for the
// families above: facts from Karpenter's generated table
// (aws/karpenter-provider-aws pkg/providers/instancetype/zz_generated.bandwidth.go,
// commit 9c68c87f33f8a5cdff290cf5feeeb02644114b39, Apache-2.0; values only).
// The source catalog has no bandwidth, so it is supplied here; the generator
// fails when a kept type has no entry or an entry matches no kept type.
var bandwidthMbps = parseSizes(map[string]string{
	"t3":       "nano=32 micro=64 small=128 medium=256 large=512 xlarge=1024 2xlarge=2048",
	"t3a":      "nano=32 micro=64 small=128 medium=256 large=512 xlarge=1024 2xlarge=2048",
	"t4g":      "nano=32 micro=64 small=128 medium=256 large=512 xlarge=1024 2xlarge=2048",
	"m5":       "large=750 xlarge=1250 2xlarge=2500 4xlarge=5000 8xlarge=10000 12xlarge=12000 16xlarge=20000 24xlarge=25000 metal=25000",
	"m6i":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 metal=50000",
	"m6a":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 48xlarge=50000 metal=50000",
	"m6g":      "medium=500 large=750 xlarge=1250 2xlarge=2500 4xlarge=5000 8xlarge=12000 12xlarge=20000 16xlarge=25000 metal=25000",
	"m7i":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 metal-24xl=37500 48xlarge=50000 metal-48xl=50000",
	"m7i-flex": "large=390 xlarge=781 2xlarge=1562 4xlarge=3125 8xlarge=6250 12xlarge=9375 16xlarge=12500",
	"m7a":      "medium=390 large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 48xlarge=50000 metal-48xl=50000",
	"m7g":      "medium=520 large=937 xlarge=1876 2xlarge=3750 4xlarge=7500 8xlarge=15000 12xlarge=22500 16xlarge=30000 metal=30000",
	"m8g":      "medium=520 large=937 xlarge=1875 2xlarge=3750 4xlarge=7500 8xlarge=15000 12xlarge=22500 16xlarge=30000 24xlarge=40000 metal-24xl=40000 48xlarge=50000 metal-48xl=50000",
	"c5":       "large=750 xlarge=1250 2xlarge=2500 4xlarge=5000 9xlarge=12000 12xlarge=12000 18xlarge=25000 24xlarge=25000 metal=25000",
	"c6i":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 metal=50000",
	"c6a":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 48xlarge=50000 metal=50000",
	"c6g":      "medium=500 large=750 xlarge=1250 2xlarge=2500 4xlarge=5000 8xlarge=12000 12xlarge=20000 16xlarge=25000 metal=25000",
	"c6gn":     "medium=1600 large=3000 xlarge=6300 2xlarge=12500 4xlarge=25000 8xlarge=50000 12xlarge=75000 16xlarge=100000",
	"c7i":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 metal-24xl=37500 48xlarge=50000 metal-48xl=50000",
	"c7a":      "medium=390 large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 48xlarge=50000 metal-48xl=50000",
	"c7g":      "medium=520 large=937 xlarge=1876 2xlarge=3750 4xlarge=7500 8xlarge=15000 12xlarge=22500 16xlarge=30000 metal=30000",
	"c8g":      "medium=520 large=937 xlarge=1875 2xlarge=3750 4xlarge=7500 8xlarge=15000 12xlarge=22500 16xlarge=30000 24xlarge=40000 metal-24xl=40000 48xlarge=50000 metal-48xl=50000",
	"r5":       "large=750 xlarge=1250 2xlarge=2500 4xlarge=5000 8xlarge=10000 12xlarge=12000 16xlarge=20000 24xlarge=25000 metal=25000",
	"r6i":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 metal=50000",
	"r6a":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 48xlarge=50000 metal=50000",
	"r6g":      "medium=500 large=750 xlarge=1250 2xlarge=2500 4xlarge=5000 8xlarge=12000 12xlarge=20000 16xlarge=25000 metal=25000",
	"r7i":      "large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 metal-24xl=37500 48xlarge=50000 metal-48xl=50000",
	"r7a":      "medium=390 large=781 xlarge=1562 2xlarge=3125 4xlarge=6250 8xlarge=12500 12xlarge=18750 16xlarge=25000 24xlarge=37500 32xlarge=50000 48xlarge=50000 metal-48xl=50000",
	"r7g":      "medium=520 large=937 xlarge=1876 2xlarge=3750 4xlarge=7500 8xlarge=15000 12xlarge=22500 16xlarge=30000 metal=30000",
	"r8g":      "medium=520 large=937 xlarge=1875 2xlarge=3750 4xlarge=7500 8xlarge=15000 12xlarge=22500 16xlarge=30000 24xlarge=40000 metal-24xl=40000 48xlarge=50000 metal-48xl=50000",
	"g4dn":     "xlarge=5000 2xlarge=10000 4xlarge=20000 8xlarge=50000 12xlarge=50000 16xlarge=50000 metal=100000",
	"g5":       "xlarge=2500 2xlarge=5000 4xlarge=10000 8xlarge=25000 12xlarge=40000 16xlarge=25000 24xlarge=50000 48xlarge=100000",
	"g6":       "xlarge=2500 2xlarge=5000 4xlarge=10000 8xlarge=25000 12xlarge=40000 16xlarge=25000 24xlarge=50000 48xlarge=100000",
	"g6e":      "xlarge=2500 2xlarge=5000 4xlarge=20000 8xlarge=25000 12xlarge=100000 16xlarge=35000 24xlarge=200000 48xlarge=400000",
	"g6f":      "large=1500 xlarge=2500 2xlarge=5000 4xlarge=10000",
	"p4d":      "24xlarge=400000",
	"p5":       "4xlarge=100000 48xlarge=3200000",
	"inf2":     "xlarge=2083 8xlarge=16667 24xlarge=50000 48xlarge=100000",
})

// inferentia2 describes the inf2 accelerators, which the source catalog does not
// carry. Device counts per size are Karpenter's published
// karpenter.k8s.aws/instance-accelerator-count values
// (website/content/en/preview/reference/instance-types.md: 1, 1, 6, 12). The
// name is what current Karpenter writes from EC2's NeuronInfo device name
// "Inferentia2" lower-cased (older releases wrote "inferentia" from
// InferenceAcceleratorInfo); manufacturer "aws" as Karpenter hard-codes it for
// Neuron devices. Memory (32 GiB HBM) and two NeuronCore-v2 per device are from
// the AWS Neuron documentation (aws-neuron/aws-neuron-sdk,
// general/arch/neuron-hardware/inferentia2.rst).
var inferentia2 = map[string]int{"inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12}

func inferentia2Accelerator(count int) *catalog.Accelerator {
	return &catalog.Accelerator{Count: count, Name: "inferentia2", Manufacturer: "aws", MemoryMiB: 32 * 1024, CoresPerDevice: 2}
}

func parseSizes(byFamily map[string]string) map[string]int64 {
	out := map[string]int64{}
	for family, list := range byFamily {
		for _, pair := range strings.Fields(list) {
			size, v, ok := strings.Cut(pair, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || n <= 0 {
				panic(fmt.Sprintf("gen: bad bandwidth entry %q for %s", pair, family))
			}
			out[family+"."+size] = n
		}
	}
	return out
}
