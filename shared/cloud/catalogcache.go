package cloud

import (
	"context"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// CatalogCache keeps what LiveCatalog reads from EC2 across the invocations of a
// warm container: the instance types and where they are offered for TypesTTL (they
// change when AWS adds a type or a zone), spot prices for PricesTTL. Reading the
// types is most of an invocation's EC2 traffic and time; Karpenter refreshes both
// on timers too. The unavailable-offerings marks are applied on every call, never
// cached.
type CatalogCache struct {
	typesTTL, pricesTTL time.Duration

	mu       sync.Mutex
	typesAt  time.Time
	types    []catalog.InstanceType
	offered  map[string]map[string]bool
	pricesAt time.Time
	spot     map[string]map[string]float64
}

// NewCatalogCache returns an empty cache.
func NewCatalogCache(typesTTL, pricesTTL time.Duration) *CatalogCache {
	return &CatalogCache{typesTTL: typesTTL, pricesTTL: pricesTTL}
}

func fresh(at, now time.Time, ttl time.Duration) bool {
	return !at.IsZero() && !now.Before(at) && now.Sub(at) < ttl
}

// catalogInputs reads instance types, offerings and spot prices, each from the
// cache while it is fresh. Cached values are shared: callers only read them.
func (p *Provider) catalogInputs(ctx context.Context) ([]catalog.InstanceType, map[string]map[string]bool, map[string]map[string]float64, error) {
	c := p.cfg.CatalogCache
	if c == nil {
		return p.readCatalogInputs(ctx, true, true)
	}
	now := p.cfg.Clock()
	c.mu.Lock()
	types, offered, spot := c.types, c.offered, c.spot
	needTypes, needPrices := !fresh(c.typesAt, now, c.typesTTL), !fresh(c.pricesAt, now, c.pricesTTL)
	c.mu.Unlock()
	if !needTypes {
		p.remember(types)
		p.mu.Lock()
		p.offered, p.allOffered = offered, true
		p.mu.Unlock()
	}
	t, o, s, err := p.readCatalogInputs(ctx, needTypes, needPrices)
	if err != nil {
		return nil, nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if needTypes {
		c.types, c.offered, c.typesAt = t, o, now
		types, offered = t, o
	}
	if needPrices {
		c.spot, c.pricesAt = s, now
		spot = s
	}
	return types, offered, spot, nil
}

func (p *Provider) readCatalogInputs(ctx context.Context, types, prices bool) (t []catalog.InstanceType, o map[string]map[string]bool, s map[string]map[string]float64, err error) {
	if types {
		if t, err = p.InstanceTypes(ctx); err != nil {
			return nil, nil, nil, err
		}
		if o, err = p.offerings(ctx); err != nil {
			return nil, nil, nil, err
		}
	}
	if prices {
		if s, err = p.SpotPrices(ctx); err != nil {
			return nil, nil, nil, err
		}
	}
	return t, o, s, nil
}
