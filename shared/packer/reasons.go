package packer

import (
	"fmt"
	"slices"
	"strings"
)

// Why a pod stays unschedulable. Like Nomad's FilterNode(option, reason), the
// pool filter in bestNew records each NodePool's rejection where it turns the
// pod down, and the topology checks what turned it away where they fail (see
// block); the reason a plan gives is composed from those records, pool by
// pool, with no second derivation. Only a pod's last attempt records (see place):
// a pod reaches it only after every other rung failed, so placing the pods that
// fit pays nothing for it. The records kept are those of the last retry round,
// in which nothing was placed, so they describe the final state.

// stage is how far a pool's best new node for the pod got before it was turned
// down; the furthest over the pool's zones and candidates is its verdict.
type stage int8

const (
	// stageClass: the pool, its types or its taints do not suit the pod (the
	// class's classPool.reason says which).
	stageClass stage = iota
	// stageRoom: no type the pod may use holds its requests.
	stageRoom
	// stageReservations: the types that hold it are capacity reservations with
	// no slot left (see reserved.go).
	stageReservations
	// stageLimits: the types that hold it would break the pool's limits.
	stageLimits
	// stageMinValues: the types that hold it within the limits span too few
	// values for the pool's minValues.
	stageMinValues
	// stageTopology: a node would hold it within the limits, but topology or host
	// ports rule out every place it could open.
	stageTopology
)

// rejections is a pod's record of why each pool gave it no new node.
type rejections struct {
	pools []poolRejection // by pool index
	// zones is why each zone's own topology turns the pod away on the attempt
	// (see zoneMask), host why hostname-level topology turns a new node away
	// in every zone (see bestNew).
	zones []block
	host  block
}

type poolRejection struct {
	stage stage
	// largest is the largest allocatable (less DaemonSets) among the types the
	// pod may use that were too small for it.
	largest vec
	// full are the reservations that would hold it but had no slot left.
	full []string
	// why is what turned it away from nodes that would hold it (stageTopology),
	// the first to name of all that did (see block.before).
	why block
}

// start clears the record for a new attempt. Every method does nothing on a nil
// record: attempts that are not recorded pass nil.
func (r *rejections) start(pools int) {
	if r == nil {
		return
	}
	if cap(r.pools) < pools {
		r.pools = make([]poolRejection, pools)
	}
	r.pools = r.pools[:pools]
	clear(r.pools)
}

// startZones clears the record of why zones and new nodes are out for a new
// attempt.
func (r *rejections) startZones(zones int) {
	if r == nil {
		return
	}
	if cap(r.zones) < zones {
		r.zones = make([]block, zones)
	}
	r.zones = r.zones[:zones]
	clear(r.zones)
	r.host = block{}
}

// reject notes that pool got as far as st before it was turned down.
func (r *rejections) reject(pool int, st stage) {
	if r != nil && st > r.pools[pool].stage {
		r.pools[pool].stage = st
	}
}

// tooSmall notes a type of pool too small for the pod.
func (r *rejections) tooSmall(pool int, avail vec) {
	if r != nil {
		r.pools[pool].largest = r.pools[pool].largest.maxWith(avail)
	}
}

// blocked notes that b turned the pod away from a node of pool that would
// hold it.
func (r *rejections) blocked(pool int, b block) {
	if r != nil && b.before(r.pools[pool].why) {
		r.pools[pool].why = b
	}
}

// zoneOut notes that the pod's topology turned a node of pool away in zone z.
func (r *rejections) zoneOut(pool, z int) {
	if r != nil {
		r.blocked(pool, r.zones[z])
		r.blocked(pool, r.host)
	}
}

// add merges what another walk recorded for pool into r, as if r had
// recorded it: the furthest stage, the largest too-small type, the full
// reservations in the order found, what turned the pod away.
func (r *rejections) add(pool int, o poolRejection) {
	if r == nil {
		return
	}
	r.reject(pool, o.stage)
	r.tooSmall(pool, o.largest)
	r.blocked(pool, o.why)
	for _, id := range o.full {
		if !slices.Contains(r.pools[pool].full, id) {
			r.pools[pool].full = append(r.pools[pool].full, id)
		}
	}
}

// unplacedReason explains, pool by pool, why nothing can take p, from what its
// last attempt recorded.
func (s *solver) unplacedReason(p *podInfo) string {
	if len(s.pools) == 0 {
		return "no NodePool exists, and no existing node can take it"
	}
	cls := s.hardClass(p)
	reasons := make([]string, 0, len(s.pools))
	for _, pool := range s.pools {
		r := p.rej.pools[pool.idx]
		switch r.stage {
		case stageClass:
			reasons = append(reasons, cls.perPool[pool.idx].reason)
		case stageRoom:
			reasons = append(reasons, fmt.Sprintf("NodePool %s: no instance type has room for requests %s (largest allocatable less DaemonSets: %s)",
				pool.name, s.dims.describe(p.req), s.dims.describe(r.largest)))
		case stageReservations:
			reasons = append(reasons, s.fullText(pool, r.full))
		case stageLimits:
			reasons = append(reasons, fmt.Sprintf("NodePool %s: its limits (%s) leave no room for another node that fits", pool.name, s.limitsText(pool)))
		case stageMinValues:
			reasons = append(reasons, fmt.Sprintf("NodePool %s: no node that holds it keeps %s", pool.name, pool.minValuesText()))
		default:
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", pool.name, p.blockText(r.why)))
		}
	}
	return strings.Join(reasons, "; ")
}

func (s *solver) limitsText(p *poolInfo) string {
	var parts []string
	for i, n := range s.dims.names {
		if p.limited[i] {
			parts = append(parts, fmt.Sprintf("%s %s of %s used", n, formatQuantity(n, p.used[i]), formatQuantity(n, p.limit[i])))
		}
	}
	if p.maxNodes >= 0 {
		parts = append(parts, fmt.Sprintf("nodes %d of %d", p.nodes, p.maxNodes))
	}
	return strings.Join(parts, ", ")
}

// blockText names what turned p away.
func (p *podInfo) blockText(b block) string {
	switch b.kind {
	case blockOwn:
		return "cannot satisfy " + p.own[b.i].g.desc
	case blockAnti:
		return "another pod's " + p.matched[b.i].desc + " excludes it"
	case blockPorts:
		return "its host ports are taken on every node that could take it"
	}
	return "no node that fits is allowed by its constraints"
}
