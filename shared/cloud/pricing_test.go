package cloud

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// fakePricing stands in for the AWS Price List API, which no local emulator
// speaks (moto answers 500). It serves documents in the API's real format,
// two per page, so the provider's paging and parsing are what is tested.
type fakePricing struct {
	prices map[string]string
	err    error
	calls  int
	inputs []*pricing.GetProductsInput
}

func (f *fakePricing) GetProducts(_ context.Context, in *pricing.GetProductsInput, _ ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	f.calls++
	f.inputs = append(f.inputs, in)
	if f.err != nil {
		return nil, f.err
	}
	var docs []string
	for name, usd := range f.prices {
		docs = append(docs, fmt.Sprintf(`{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":%q,"regionCode":"us-east-1","operatingSystem":"Linux"},"sku":"SKU%s"},"serviceCode":"AmazonEC2","terms":{"OnDemand":{"SKU.JRTCKXETXF":{"priceDimensions":{"SKU.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":%q},"description":"$%s per On Demand Linux %s Instance Hour"}},"sku":"SKU","effectiveDate":"2026-11-01T00:00:00Z","offerTermCode":"JRTCKXETXF"}}},"version":"20261101","publicationDate":"2026-11-01T00:00:00Z"}`, name, name, usd, usd, name))
	}
	// Map order is random; sort for stable pages.
	sortStrings(docs)
	start := 0
	if in.NextToken != nil {
		fmt.Sscanf(*in.NextToken, "%d", &start)
	}
	end := min(start+2, len(docs))
	out := &pricing.GetProductsOutput{PriceList: docs[start:end]}
	if end < len(docs) {
		out.NextToken = aws.String(fmt.Sprint(end))
	}
	return out, nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func offering(t *testing.T, c *catalog.Catalog, name, zone, ct string) catalog.Offering {
	t.Helper()
	it, ok := c.Lookup(name)
	if !ok {
		t.Fatalf("%s not in the catalog", name)
	}
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o
		}
	}
	t.Fatalf("%s has no %s offering in %s", name, ct, zone)
	return catalog.Offering{}
}

func TestLiveCatalog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		fake := &fakePricing{prices: map[string]string{"m6i.large": "0.1010000000", "m7i.large": "0.1108000000", "c5.large": "0.0000000000"}}
		// Default attempts: a transient connection error on a loaded machine (seen once
		// in CI) is retried like any other; this test is about prices, not retries.
		clients := NewClients(e.cfg, RetryOptions{}, false)
		clients.Pricing = fake
		cfg := e.config()
		p, err := New(cfg, clients)
		if err != nil {
			t.Fatal(err)
		}
		e.cache.MarkUnavailable("m6i.large", "us-east-1b", "spot")
		c, err := p.LiveCatalog(ctx, []string{"us-east-1a", "us-east-1b"})
		if err != nil {
			t.Fatal(err)
		}
		if fake.calls != 2 {
			t.Errorf("GetProducts called %d times, want 2 pages", fake.calls)
		}
		if f := fake.inputs[0]; aws.ToString(f.ServiceCode) != "AmazonEC2" || len(f.Filters) != 6 {
			t.Errorf("GetProducts input %+v", f)
		}
		if o := offering(t, c, "m6i.large", "us-east-1a", "on-demand"); o.PricePerHour != 0.101 || o.Estimate || !o.Available {
			t.Errorf("m6i.large on-demand = %+v, want the Pricing API's 0.101", o)
		}
		// No Pricing API price (c5.large's is a zero placeholder): the catalog's list price.
		base, _ := catalog.Embedded().Lookup("c5.large")
		var list float64
		for _, o := range base.Offerings {
			if o.CapacityType == "on-demand" {
				list = o.PricePerHour
			}
		}
		if o := offering(t, c, "c5.large", "us-east-1a", "on-demand"); list <= 0 || o.PricePerHour != list {
			t.Errorf("c5.large on-demand = %+v, want the catalog's list price %v", o, list)
		}
		// Spot from DescribeSpotPriceHistory (moto's prices are placeholders, but they are live answers).
		spot := offering(t, c, "m6i.large", "us-east-1a", "spot")
		if spot.Estimate || spot.PricePerHour <= 0 || math.IsNaN(spot.PricePerHour) {
			t.Errorf("m6i.large spot = %+v, want a live price", spot)
		}
		if o := offering(t, c, "m6i.large", "us-east-1b", "spot"); o.Available {
			t.Errorf("an offering in the unavailable cache must be Available=false: %+v", o)
		}
		if zones := c.Zones(); len(zones) != 2 {
			t.Errorf("zones %v, want only the requested two", zones)
		}
		if n := e.proxy.count("DescribeSpotPriceHistory"); n < 1 {
			t.Errorf("DescribeSpotPriceHistory not called")
		}
		f := e.proxy.formsOf("DescribeSpotPriceHistory")[0]
		if f.Get("StartTime") == "" || f.Get("ProductDescription.1") != "Linux/UNIX" {
			t.Errorf("spot history request %v", f)
		}
	})
}

func TestOnDemandPricesUnreachableFallsBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		clients := NewClients(e.cfg, RetryOptions{MaxAttempts: 2}, false)
		clients.Pricing = &fakePricing{err: errors.New("dial tcp: lookup api.pricing.us-east-1.amazonaws.com: no such host")}
		p, err := New(e.config(), clients)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.OnDemandPrices(context.Background()); err == nil {
			t.Fatal("want the Pricing API error")
		}
	})
}

func TestParsePriceListItem(t *testing.T) {
	name, price, ok, err := parsePriceListItem(`{"product":{"attributes":{"instanceType":"g6.xlarge"}},"terms":{"OnDemand":{"a":{"priceDimensions":{"b":{"unit":"Hrs","pricePerUnit":{"USD":"0.8048000000"}}}}}}}`)
	if err != nil || !ok || name != "g6.xlarge" || price != 0.8048 {
		t.Errorf("got %s %v %v %v", name, price, ok, err)
	}
	if _, _, _, err := parsePriceListItem(`{"product":`); err == nil {
		t.Error("truncated document accepted")
	}
	if _, _, _, err := parsePriceListItem(`{"product":{"attributes":{"instanceType":"x"}},"terms":{"OnDemand":{"a":{"priceDimensions":{"b":{"unit":"Hrs","pricePerUnit":{"USD":"abc"}}}}}}}`); err == nil {
		t.Error("non-numeric price accepted")
	}
}
