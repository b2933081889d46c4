// Package cloud is Joiner's EC2 provider: it discovers what an EC2NodeClass
// selects (subnets, security groups, AMIs, instance types and their offerings),
// prices offerings, launches one instance per NodeClaim with CreateFleet, and
// terminates only instances Joiner launched.
//
// It talks to AWS through interfaces no wider than the calls it makes
// ([EC2API], [IAMAPI], [SSMAPI], [EKSAPI], [PricingAPI]); the real
// aws-sdk-go-v2 clients satisfy the EC2, IAM and Pricing ones, shared/awsjson's
// small clients the SSM and EKS ones (the generated SSM and EKS clients would add
// ~1.25 MB of API schema to every bootstrap for one call each), so production,
// replay against a local simulator and the tests share one code path.
//
// A [Provider] lives for one invocation: what it discovers is cached inside it
// and dropped with it. The unavailable-offerings cache ([UnavailableOfferings])
// and the instance-profile cache ([InstanceProfileCache]) outlive invocations,
// as a warm Lambda container keeps them.
//
// # DRY_RUN
//
// With Config.DryRun every mutating call (CreateLaunchTemplate, CreateFleet,
// CreateTags, TerminateInstances, DeleteLaunchTemplate) is sent with
// DryRun=true. EC2 answers DryRunOperation when the caller's permissions would
// have allowed the call and UnauthorizedOperation when they would not; each
// answer is reported as a [DryRunResult].
package cloud

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/singleflight"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// EC2API is the part of *ec2.Client the provider calls.
type EC2API interface {
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// SSMAPI reads the public AMI parameters. (Bootstrap tokens are read by the
// nodes themselves, never by Joiner.)
// *awsjson.SSM implements it; a missing parameter is the error code ParameterNotFound.
type SSMAPI interface {
	GetParameter(ctx context.Context, name string) (awsjson.Parameter, error)
}

// EKSAPI reads the cluster endpoint, CA, service CIDR and version of an EKS cluster.
// *awsjson.EKS implements it.
type EKSAPI interface {
	DescribeCluster(ctx context.Context, name string) (awsjson.Cluster, error)
}

// PricingAPI is the AWS Price List query API (on-demand list prices).
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// Clients are the API clients a Provider uses. EC2 is required; SSM is needed
// for alias AMIs and ssmParameter selector terms, EKS when the cluster's endpoint
// or version is not configured, Pricing for
// live on-demand prices (optional: the catalog's prices stand in).
type Clients struct {
	EC2 EC2API
	// IAM manages the instance profiles of EC2NodeClasses that name a role.
	IAM     IAMAPI
	SSM     SSMAPI
	EKS     EKSAPI
	Pricing PricingAPI
}

// Config is the provider's configuration.
type Config struct {
	// ClusterName names the cluster; it is part of the ownership tag
	// kubernetes.io/cluster/<ClusterName>=owned. Required.
	ClusterName string
	// Region is the AWS region (zones, pricing filter, on-instance token fetch).
	Region string
	// ClusterEndpoint, ClusterCABundle (base64 PEM) and ClusterCIDR (service
	// CIDR) go into user data. When the endpoint is empty they are read from
	// EKS DescribeCluster.
	ClusterEndpoint string
	ClusterCABundle string
	ClusterCIDR     string
	// KubernetesVersion (e.g. "1.30") picks alias AMIs; read from EKS when empty.
	KubernetesVersion string
	// SelfManaged says the cluster is not an EKS cluster: Cluster never calls EKS
	// (there is no cluster to describe, and the functions' role may not), so the
	// endpoint and version must be configured (from the cluster secret and the API
	// server's /version); a missing one is an error naming it.
	SelfManaged bool
	// CACertHash is the kubeadm discovery hash for Custom user data; the
	// EC2NodeClass annotation joiner.dev/ca-cert-hash overrides it.
	CACertHash string
	// DryRun sends every mutating call with DryRun=true (see the package doc).
	DryRun bool
	// Clock is the time source (spot price history, launch bookkeeping and, when
	// Unavailable is nil, a private unavailable-offerings cache). Nil means time.Now.
	Clock func() time.Time
	// Unavailable is the unavailable-offerings cache. Nil means the process-wide
	// cache (SharedUnavailable) unless Clock is set, which gets a private one.
	Unavailable *UnavailableOfferings
	// InstanceProfiles, when set, remembers the managed instance profiles seen
	// holding their role across invocations; nil asks IAM once per invocation.
	InstanceProfiles *InstanceProfileCache
	// CatalogCache, when set, keeps LiveCatalog's EC2 reads across invocations
	// (see CatalogCache); nil reads them on every call.
	CatalogCache *CatalogCache
	// Catalog supplies instance-type facts and the on-demand prices used when
	// the Pricing API is unreachable. Nil means catalog.Embedded().
	Catalog *catalog.Catalog
	// PublicParameterRoot replaces "/aws/service" in the public SSM parameter
	// paths of alias AMIs. Production leaves it empty; it exists for emulators
	// that reserve /aws (moto refuses to store parameters under it).
	PublicParameterRoot string
	// PricingTimeout bounds the Pricing API refresh (default 10s); past it the
	// catalog's prices are used.
	PricingTimeout time.Duration
	// Logger receives JSON logs; nil means slog.Default().
	Logger *slog.Logger
}

// Cloud is what the function handlers need from EC2; *Provider implements it,
// and a handler test may substitute its own.
type Cloud interface {
	Launch(ctx context.Context, req LaunchRequest) (Instance, error)
	ConfirmLaunched(ctx context.Context) error
	Terminate(ctx context.Context, ids ...string) (TerminateResult, error)
	ListOwned(ctx context.Context) ([]OwnedInstance, error)
	LiveCatalog(ctx context.Context, zones []string) (*catalog.Catalog, error)
	DeleteLaunchTemplates(ctx context.Context, nodeClass string, keep ...string) ([]string, error)
	DeleteInstanceProfile(ctx context.Context, nodeClass string) (bool, error)
	ResolveNodeClass(ctx context.Context, nc *karpenter.EC2NodeClass) (Resolved, error)
	DryRuns() []DryRunResult
}

var _ Cloud = (*Provider)(nil)

// Provider is the EC2 provider for one invocation.
type Provider struct {
	cfg         Config
	api         Clients
	unavailable *UnavailableOfferings
	log         *slog.Logger
	catalog     *catalog.Catalog

	mu           sync.Mutex
	cluster      *ClusterInfo
	subnets      map[string][]Subnet
	groups       map[string][]SecurityGroup
	amis         map[string][]AMI
	reservations map[string][]CapacityReservation
	params       map[string]string
	offered      map[string]map[string]bool // instance type → zones offering it
	allOffered   bool                       // offered covers every type
	typeInfo     map[string]*catalog.InstanceType
	templates    map[string]string // launch template name → id
	profiles     *InstanceProfileCache
	// profileErrs are this invocation's failures to ready a profile, by name.
	profileErrs map[string]error
	// profileFlight readies each profile once when launches run concurrently:
	// two AddRoleToInstanceProfile calls for one profile fail the second with
	// LimitExceeded (a profile holds one role).
	profileFlight singleflight.Group
	// templateFlight finds or creates each launch template once at a time.
	templateFlight singleflight.Group
	userData       map[string]string // rendering options → user data
	dryRuns        []DryRunResult
	// unconfirmed are launches ConfirmLaunched has yet to check.
	unconfirmed []pendingTags
}

// New returns a Provider for one invocation.
func New(cfg Config, api Clients) (*Provider, error) {
	if cfg.ClusterName == "" {
		return nil, errors.New("cloud: Config.ClusterName is required (it scopes the ownership tag)")
	}
	if api.EC2 == nil {
		return nil, errors.New("cloud: an EC2 client is required")
	}
	ownClock := cfg.Clock != nil
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.PricingTimeout <= 0 {
		cfg.PricingTimeout = 10 * time.Second
	}
	unavailable := cfg.Unavailable
	if unavailable == nil {
		unavailable = SharedUnavailable
		if ownClock {
			unavailable = NewUnavailableOfferings(cfg.Clock)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cat := cfg.Catalog
	if cat == nil {
		cat = catalog.Embedded()
	}
	profiles := cfg.InstanceProfiles
	if profiles == nil {
		profiles = NewInstanceProfileCache(cfg.Clock)
	}
	return &Provider{
		cfg: cfg, api: api, unavailable: unavailable, log: log.With("component", "cloud"), catalog: cat,
		subnets: map[string][]Subnet{}, groups: map[string][]SecurityGroup{}, amis: map[string][]AMI{}, reservations: map[string][]CapacityReservation{},
		params: map[string]string{}, templates: map[string]string{}, userData: map[string]string{},
		profiles: profiles, profileErrs: map[string]error{},
	}, nil
}

// Unavailable returns the unavailable-offerings cache the provider consults.
func (p *Provider) Unavailable() *UnavailableOfferings { return p.unavailable }

// ownerTagKey is the ownership tag's key.
func (p *Provider) ownerTagKey() string { return "kubernetes.io/cluster/" + p.cfg.ClusterName }

func (p *Provider) now() time.Time { return p.cfg.Clock() }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
