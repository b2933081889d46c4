package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// OnDemandPrices reads Linux shared-tenancy on-demand list prices for the
// region from the Price List API, keyed by instance type.
func (p *Provider) OnDemandPrices(ctx context.Context) (map[string]float64, error) {
	if p.api.Pricing == nil {
		return nil, fmt.Errorf("no Pricing API client")
	}
	if p.cfg.Region == "" {
		return nil, fmt.Errorf("on-demand prices need Config.Region")
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PricingTimeout)
	defer cancel()
	term := pricingtypes.FilterTypeTermMatch
	in := &pricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{
			{Field: aws.String("regionCode"), Type: term, Value: aws.String(p.cfg.Region)},
			{Field: aws.String("operatingSystem"), Type: term, Value: aws.String("Linux")},
			{Field: aws.String("tenancy"), Type: term, Value: aws.String("Shared")},
			{Field: aws.String("preInstalledSw"), Type: term, Value: aws.String("NA")},
			{Field: aws.String("capacitystatus"), Type: term, Value: aws.String("Used")},
			{Field: aws.String("marketoption"), Type: term, Value: aws.String("OnDemand")},
		},
	}
	prices := map[string]float64{}
	pg := pricing.NewGetProductsPaginator(p.api.Pricing, in)
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("Pricing GetProducts", err)
		}
		for _, doc := range out.PriceList {
			name, price, ok, err := parsePriceListItem(doc)
			if err != nil {
				return nil, err
			}
			if ok {
				prices[name] = price
			}
		}
	}
	return prices, nil
}

// priceListItem is the part of a Price List product document Joiner reads.
type priceListItem struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func parsePriceListItem(doc string) (name string, price float64, ok bool, err error) {
	var item priceListItem
	if err := json.Unmarshal([]byte(doc), &item); err != nil {
		return "", 0, false, fmt.Errorf("Pricing GetProducts: undecodable price list item: %w", err)
	}
	name = item.Product.Attributes.InstanceType
	if name == "" {
		return "", 0, false, nil
	}
	for _, term := range item.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd, has := dim.PricePerUnit["USD"]
			if !has || (dim.Unit != "Hrs" && dim.Unit != "") {
				continue
			}
			v, err := strconv.ParseFloat(usd, 64)
			if err != nil {
				return "", 0, false, fmt.Errorf("Pricing GetProducts: %s: price %q is not a number", name, usd)
			}
			// A zero price is a placeholder for types not sold on demand.
			if v > 0 {
				return name, v, true, nil
			}
		}
	}
	return name, 0, false, nil
}

// SpotPrices reads the current spot price per (instance type, zone) from
// DescribeSpotPriceHistory, keeping the latest entry of each.
func (p *Provider) SpotPrices(ctx context.Context) (map[string]map[string]float64, error) {
	type latest struct {
		price float64
		at    int64
	}
	seen := map[string]map[string]latest{}
	// A start time of now returns exactly the price in force for each pool.
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(p.api.EC2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           aws.Time(p.now()),
	})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("DescribeSpotPriceHistory", err)
		}
		for _, h := range out.SpotPriceHistory {
			v, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64)
			if err != nil || v < 0 {
				continue
			}
			t, z := string(h.InstanceType), aws.ToString(h.AvailabilityZone)
			var at int64
			if h.Timestamp != nil {
				at = h.Timestamp.UnixNano()
			}
			if seen[t] == nil {
				seen[t] = map[string]latest{}
			}
			if cur, ok := seen[t][z]; !ok || at >= cur.at {
				seen[t][z] = latest{v, at}
			}
		}
	}
	out := make(map[string]map[string]float64, len(seen))
	for t, zones := range seen {
		out[t] = make(map[string]float64, len(zones))
		for z, l := range zones {
			out[t][z] = l.price
		}
	}
	return out, nil
}

// LiveCatalog builds the catalog the engine plans with: the instance types EC2
// reports (facts from the base catalog when it knows the type), offered in
// the zones DescribeInstanceTypeOfferings lists for on-demand and spot. Prices:
// on-demand from the Pricing API when it answers, else the base catalog's;
// spot from DescribeSpotPriceHistory, else the base catalog's estimate (still
// flagged Estimate). An offering with no price at all is left out, and a type
// left without offerings is dropped. Offerings in the unavailable cache are
// marked Available=false. zones, when not empty, restricts the offerings.
func (p *Provider) LiveCatalog(ctx context.Context, zones []string) (*catalog.Catalog, error) {
	types, offered, spot, err := p.catalogInputs(ctx)
	if err != nil {
		return nil, err
	}
	onDemand := map[string]float64{}
	if p.api.Pricing != nil {
		if od, err := p.OnDemandPrices(ctx); err != nil {
			p.log.Warn("Pricing API unavailable, using the catalog's on-demand prices", "error", err.Error())
		} else {
			onDemand = od
		}
	}
	var out []catalog.InstanceType
	dropped := 0
	for _, it := range types {
		base, _ := p.catalog.Lookup(it.Name)
		for _, zone := range slices.Sorted(maps.Keys(offered[it.Name])) {
			if len(zones) > 0 && !slices.Contains(zones, zone) {
				continue
			}
			for _, ct := range []string{karpenter.CapacityTypeOnDemand, karpenter.CapacityTypeSpot} {
				o := catalog.Offering{Zone: zone, CapacityType: ct, Available: true}
				priced := false
				switch ct {
				case karpenter.CapacityTypeOnDemand:
					if v, ok := onDemand[it.Name]; ok {
						o.PricePerHour, priced = v, true
					} else if bo, ok := baseOffering(base, zone, ct); ok {
						o.PricePerHour, o.Estimate, priced = bo.PricePerHour, bo.Estimate, true
					}
				case karpenter.CapacityTypeSpot:
					if v, ok := spot[it.Name][zone]; ok {
						o.PricePerHour, priced = v, true
					} else if bo, ok := baseOffering(base, zone, ct); ok {
						o.PricePerHour, o.Estimate, priced = bo.PricePerHour, true, true
					}
				}
				if !priced || catalog.PriceProblem(o.PricePerHour) != "" {
					continue // a zero or absurd price from a feed is no price
				}
				if p.unavailable.IsUnavailable(it.Name, zone, ct) {
					o.Available = false
				}
				it.Offerings = append(it.Offerings, o)
			}
		}
		if len(it.Offerings) == 0 {
			dropped++
			continue
		}
		out = append(out, it)
	}
	if dropped > 0 {
		p.log.Info("instance types without a priced offering left out of the catalog", "count", dropped)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no instance type in %s has a priced offering", p.cfg.Region)
	}
	return catalog.New(p.cfg.Region, out)
}

// baseOffering finds the base catalog's offering for a zone and capacity type;
// on-demand list prices are regional, so any zone's on-demand price serves.
func baseOffering(base *catalog.InstanceType, zone, ct string) (catalog.Offering, bool) {
	if base == nil {
		return catalog.Offering{}, false
	}
	var any *catalog.Offering
	for i := range base.Offerings {
		o := &base.Offerings[i]
		if o.CapacityType != ct {
			continue
		}
		if o.Zone == zone {
			return *o, true
		}
		if any == nil {
			any = o
		}
	}
	if any != nil && ct == karpenter.CapacityTypeOnDemand {
		return *any, true
	}
	return catalog.Offering{}, false
}

// zoneOf finds a subnet's zone among discovered subnets.
func zoneOf(subnets []Subnet, id string) string {
	for _, s := range subnets {
		if s.ID == id {
			return s.Zone
		}
	}
	return ""
}
