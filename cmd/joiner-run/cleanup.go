package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
)

func init() {
	register(cli.Command{Name: "cleanup", Summary: cli.RunSummary("cleanup"), Run: runCleanup})
}

const cleanupUsage = `usage: joiner cleanup --cluster NAME [--region REGION] [--dry-run]

Terminates the instances Joiner launched for cluster NAME and deletes its launch
templates and the instance profiles it created: what ` + "`cdk destroy`" + ` leaves behind.
Only instances tagged kubernetes.io/cluster/NAME=owned that also carry a
karpenter.sh/nodepool tag are touched (Joiner's ownership rule), only launch
templates tagged owned and joiner.dev/managed-by=joiner, and only instance profiles
named NAME_<number> tagged owned and karpenter.k8s.aws/ec2nodeclass. Run it before
` + "`cdk destroy`" + ` when the stack created the node role: IAM refuses to delete a role an
instance profile still holds. Drain the cluster first (delete the NodePools while
the functions still run) when its pods matter. AWS credentials and region come from
the SDK's default chain (profiles, SSO, environment; AWS_ENDPOINT_URL is honoured).`

func runCleanup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := fs.String("cluster", "", "the cluster name the stack was deployed with (-c clusterName)")
	region := fs.String("region", "", "AWS region (default: the SDK's, e.g. AWS_REGION)")
	dryRun := fs.Bool("dry-run", false, "send every call with DryRun=true: list what would go and whether the permissions allow it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, cleanupUsage)
		fs.PrintDefaults()
	}
	if _, err := cli.ParseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "joiner cleanup: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *cluster == "" {
		fmt.Fprintln(stderr, "joiner cleanup: --cluster is required (the ownership tag is per cluster)")
		return 2
	}
	var opts []func(*awsconfig.LoadOptions) error
	if *region != "" {
		opts = append(opts, awsconfig.WithRegion(*region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "joiner cleanup: AWS configuration: %v\n", err)
		return 1
	}
	if cfg.Region == "" {
		fmt.Fprintln(stderr, "joiner cleanup: no AWS region: pass --region or set AWS_REGION")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clients := cloud.NewClients(cfg, cloud.RetryOptions{}, false)
	p, err := cloud.New(cloud.Config{ClusterName: *cluster, Region: cfg.Region, DryRun: *dryRun, Logger: log}, clients)
	if err != nil {
		fmt.Fprintf(stderr, "joiner cleanup: %v\n", err)
		return 1
	}
	if err := cleanup(ctx, p, clients.EC2, *cluster, cfg.Region, *dryRun, stdout); err != nil {
		fmt.Fprintf(stderr, "joiner cleanup: %v\n", err)
		return 1
	}
	return 0
}

// cleanup terminates the owned instances and deletes the owned launch templates,
// through shared/cloud, which refuses anything not Joiner's.
func cleanup(ctx context.Context, p *cloud.Provider, api cloud.EC2API, cluster, region string, dryRun bool, out io.Writer) error {
	verb := map[bool]string{false: "terminating", true: "would terminate"}[dryRun]
	owned, err := p.ListOwned(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(owned))
	for _, o := range owned {
		fmt.Fprintf(out, "%s %s (%s %s, NodePool %s, NodeClaim %s)\n", verb, o.ID, o.InstanceType, o.State, o.NodePool, o.NodeClaim)
		ids = append(ids, o.ID)
	}
	res, err := p.Terminate(ctx, ids...)
	if err != nil {
		return err
	}
	for _, d := range res.DryRun {
		fmt.Fprintf(out, "dry run %s %s: allowed=%v\n", d.Operation, d.Target, d.Allowed)
	}
	// The classes whose templates Joiner created; DeleteLaunchTemplates checks
	// every tag again before deleting.
	var classes []string
	pg := ec2.NewDescribeLaunchTemplatesPaginator(api, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + cluster), Values: []string{"owned"}},
		{Name: aws.String("tag:" + cloud.TagManagedBy), Values: []string{"joiner"}},
	}})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("DescribeLaunchTemplates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			for _, t := range lt.Tags {
				if aws.ToString(t.Key) == cloud.TagNodeClass && !slices.Contains(classes, aws.ToString(t.Value)) {
					classes = append(classes, aws.ToString(t.Value))
				}
			}
		}
	}
	templates := 0
	for _, c := range classes {
		names, err := p.DeleteLaunchTemplates(ctx, c)
		if err != nil {
			return err
		}
		for _, n := range names {
			fmt.Fprintf(out, "%s launch template %s\n", map[bool]string{false: "deleted", true: "would delete"}[dryRun], n)
		}
		templates += len(names)
	}
	profiles, err := cleanupProfiles(ctx, p, cluster, region, dryRun, out)
	if err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(out, "dry run: %d instance(s), %d launch template(s) and %d instance profile(s) of cluster %s checked, nothing changed\n",
			len(ids), templates, profiles, cluster)
	} else {
		fmt.Fprintf(out, "%d instance(s) terminating, %d launch template(s) and %d instance profile(s) deleted for cluster %s\n",
			len(res.Terminating), templates, profiles, cluster)
	}
	return nil
}

// cleanupProfiles deletes the instance profiles Joiner created for the cluster's
// EC2NodeClasses (spec.role): a profile named as Joiner names its class's profile
// and tagged with the cluster and that class. cloud's DeleteInstanceProfile reads
// it again and checks both before removing its role and deleting it.
func cleanupProfiles(ctx context.Context, p *cloud.Provider, cluster, region string, dryRun bool, out io.Writer) (int, error) {
	classes, err := p.ManagedInstanceProfiles(ctx)
	if err != nil {
		return 0, err
	}
	if dryRun {
		for _, c := range classes {
			fmt.Fprintf(out, "would delete instance profile %s (EC2NodeClass %s)\n", cloud.InstanceProfileName(cluster, region, c), c)
		}
		return len(classes), nil
	}
	n := 0
	for _, c := range classes {
		deleted, err := p.DeleteInstanceProfile(ctx, c)
		if err != nil {
			return n, err
		}
		if deleted {
			fmt.Fprintf(out, "deleted instance profile %s (EC2NodeClass %s)\n", cloud.InstanceProfileName(cluster, region, c), c)
			n++
		}
	}
	return n, nil
}
