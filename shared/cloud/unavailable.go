package cloud

import (
	"fmt"
	"sync"
	"time"
)

// UnavailableTTL is how long an offering stays unavailable after EC2 reported
// it could not be fulfilled (Karpenter's value).
const UnavailableTTL = 3 * time.Minute

// UnavailableOfferings remembers offerings (instance type, zone, capacity
// type), subnets and whole capacity types that EC2 recently could not
// fulfil, so launches skip them for UnavailableTTL. It is safe for concurrent use.
type UnavailableOfferings struct {
	clock func() time.Time
	ttl   time.Duration

	mu            sync.Mutex
	offerings     map[offeringKey]time.Time // expiry
	subnets       map[string]time.Time
	capacityTypes map[string]time.Time
}

type offeringKey struct{ instanceType, zone, capacityType string }

// SharedUnavailable is the process-wide cache: a warm Lambda container keeps it
// between invocations, so an ICE seen by one invocation steers the next.
var SharedUnavailable = NewUnavailableOfferings(time.Now)

// NewUnavailableOfferings returns an empty cache reading time from clock.
func NewUnavailableOfferings(clock func() time.Time) *UnavailableOfferings {
	if clock == nil {
		clock = time.Now
	}
	return &UnavailableOfferings{
		clock: clock, ttl: UnavailableTTL,
		offerings: map[offeringKey]time.Time{}, subnets: map[string]time.Time{}, capacityTypes: map[string]time.Time{},
	}
}

// MarkUnavailable marks one offering unavailable for the TTL (extending it when
// already marked).
func (u *UnavailableOfferings) MarkUnavailable(instanceType, zone, capacityType string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.offerings[offeringKey{instanceType, zone, capacityType}] = u.clock().Add(u.ttl)
}

// MarkSubnetUnavailable marks a subnet that ran out of free addresses.
func (u *UnavailableOfferings) MarkSubnetUnavailable(subnetID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.subnets[subnetID] = u.clock().Add(u.ttl)
}

// MarkCapacityTypeUnavailable marks a whole capacity type (spot when the spot
// service-linked role cannot be created).
func (u *UnavailableOfferings) MarkCapacityTypeUnavailable(capacityType string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.capacityTypes[capacityType] = u.clock().Add(u.ttl)
}

// IsUnavailable reports whether the offering or its capacity type is marked.
func (u *UnavailableOfferings) IsUnavailable(instanceType, zone, capacityType string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	return live(u.offerings, offeringKey{instanceType, zone, capacityType}, now) || live(u.capacityTypes, capacityType, now)
}

// IsSubnetUnavailable reports whether the subnet is marked.
func (u *UnavailableOfferings) IsSubnetUnavailable(subnetID string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return live(u.subnets, subnetID, u.clock())
}

// Len returns the number of live offering marks.
func (u *UnavailableOfferings) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	n := 0
	for k := range u.offerings {
		if live(u.offerings, k, now) {
			n++
		}
	}
	return n
}

// Flush forgets every mark.
func (u *UnavailableOfferings) Flush() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.offerings)
	clear(u.subnets)
	clear(u.capacityTypes)
}

func live[K comparable](m map[K]time.Time, k K, now time.Time) bool {
	exp, ok := m[k]
	if !ok {
		return false
	}
	if !now.Before(exp) {
		delete(m, k)
		return false
	}
	return true
}

func (k offeringKey) String() string {
	return fmt.Sprintf("%s/%s/%s", k.instanceType, k.zone, k.capacityType)
}
