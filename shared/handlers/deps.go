package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Cloud is the EC2 side the handlers call; *cloud.Provider implements it.
type Cloud interface {
	Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.Instance, error)
	// ConfirmLaunched checks the tags of every instance launched so far in one read.
	ConfirmLaunched(ctx context.Context) error
	Terminate(ctx context.Context, ids ...string) (cloud.TerminateResult, error)
	ListOwned(ctx context.Context) ([]cloud.OwnedInstance, error)
	LiveCatalog(ctx context.Context, zones []string) (*catalog.Catalog, error)
	Unavailable() *cloud.UnavailableOfferings
	// ResolveNodeClass resolves an EC2NodeClass's selectors to the status Karpenter writes.
	ResolveNodeClass(ctx context.Context, nc *karpenter.EC2NodeClass) (cloud.Resolved, error)
	// CapacityReservations are the active reservations the class selects, with
	// their available counts as EC2 reports them now.
	CapacityReservations(ctx context.Context, nc *karpenter.EC2NodeClass) ([]cloud.CapacityReservation, error)
	// CollectInstanceProfiles deletes the instance profiles Joiner created for
	// EC2NodeClasses not among live, once no instance holds them.
	CollectInstanceProfiles(ctx context.Context, live []string) ([]string, error)
}

// Deps are what one invocation works with. Production builds them from the
// environment (see FromEnv); replay and tests build them over the AWS simulator and
// an in-memory or real API server. The handlers never reach around them.
type Deps struct {
	Config  Config
	Cluster kube.Cluster
	Cloud   Cloud
	Log     *slog.Logger
	Metrics *Metrics
	// Now is the clock (simulated in replay).
	Now func() time.Time
	// Identity names the invocation (function name and request id): the Lease
	// holder and the Events' reporting instance.
	Identity string
	// Sleep waits (simulated in replay); nil sleeps for real.
	Sleep func(ctx context.Context, d time.Duration) error
	// LaunchConcurrency is how many planned nodes are created and launched at
	// once: 0 is defaultLaunchConcurrency; 1 keeps plan order, which replay needs
	// for names and instance IDs that do not depend on timing.
	LaunchConcurrency int
	// ShadowMemory keeps, in shadow mode, what a round would have written that the
	// next round needs (Empty marks, removals); nil keeps nothing between rounds.
	ShadowMemory MemoryStore

	// cat is the invocation's catalog, read once: an event naming several
	// instances must not repeat the EC2 and pricing reads per instance.
	cat *catalog.Catalog
	// prepared is the container's prepared catalog (nil outside Function.Invoke).
	prepared *preparedCatalog
}

// preparedCatalog keeps the last packer.Prepared of a warm container. Each invocation
// reads a fresh catalog (availability and prices change), mostly of the same types:
// PrepareFrom carries over what depends on the types alone.
type preparedCatalog struct {
	mu sync.Mutex
	p  *packer.Prepared
}

// preparedFor returns cat prepared for the packer, reusing the container's previous
// preparation for the types whose facts did not change.
func (d *Deps) preparedFor(cat *catalog.Catalog) *packer.Prepared {
	if d.prepared == nil {
		return packer.Prepare(cat)
	}
	d.prepared.mu.Lock()
	defer d.prepared.mu.Unlock()
	if !d.prepared.p.Fits(cat) {
		d.prepared.p = packer.PrepareFrom(d.prepared.p, cat)
	}
	return d.prepared.p
}

func (d *Deps) launchConcurrency() int {
	if d.LaunchConcurrency > 0 {
		return d.LaunchConcurrency
	}
	return defaultLaunchConcurrency
}

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Deps) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// terminator lets the Kubernetes side terminate a NodeClaim's instance through the
// EC2 provider, which refuses instances Joiner does not own.
type terminator struct{ cloud Cloud }

func (t terminator) Terminate(ctx context.Context, nc *karpenter.NodeClaim) error {
	ids := []string{facts.InstanceID(nc.Status.ProviderID)}
	if ids[0] == "" {
		// The launch was never recorded (the invocation died, or the API server
		// failed, between CreateFleet and MarkLaunched): the instance, if any,
		// carries the NodeClaim's name in its tags.
		owned, err := t.cloud.ListOwned(ctx)
		if err != nil {
			return fmt.Errorf("find the instance of NodeClaim %s: %w", nc.Name, err)
		}
		ids = ids[:0]
		for _, o := range owned {
			if o.NodeClaim == nc.Name {
				ids = append(ids, o.ID)
			}
		}
		if len(ids) == 0 {
			return nil // never launched: nothing to terminate
		}
	}
	if _, err := t.cloud.Terminate(ctx, ids...); err != nil {
		return fmt.Errorf("terminate instance %s of NodeClaim %s: %w", strings.Join(ids, ","), nc.Name, err)
	}
	return nil
}

// catalogFor returns the catalog with live prices, read once per invocation; the provider already marks the
// offerings its unavailable-offerings cache holds (recent ICE, spot interruptions).
func (d *Deps) catalogFor(ctx context.Context) (*catalog.Catalog, error) {
	if d.cat != nil {
		return d.cat, nil
	}
	cat, err := d.Cloud.LiveCatalog(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("read instance types and prices: %w", err)
	}
	d.cat = cat
	return cat, nil
}
