package packer

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Label levels: topology keys other than hostname and zone, such as
// karpenter.sh/capacity-type, kubernetes.io/arch or a label a NodePool defines.
// Their domains are the key's values. An existing node's value is its label; a
// planned node's comes from its candidate (capacity type, instance-type labels,
// the pool's labels) or, for a key its types do not label, from a value its
// pool's multi-valued In requirement allows, chosen when a pod needs one. Once a
// pod that counts on a level lands on a planned node, the node's value there is
// pinned (pin): its type may still change, but only to candidates with the same
// value, so what was counted stays true.

// Pinned domains in node.ldom: a value index, or one of these.
const (
	domUnpinned int32 = -1 // planned node, nothing counted on the level yet
	domAbsent   int32 = -2 // the node does not carry the key
)

// value returns the index of v at level lv, registering it.
func (s *solver) value(lv *level, v string) int32 {
	if i, ok := lv.index[v]; ok {
		return i
	}
	i := int32(len(lv.values))
	lv.values = append(lv.values, v)
	lv.index[v] = i
	for _, g := range lv.groups {
		g.counts = append(g.counts, 0)
		g.owners = append(g.owners, 0)
	}
	return i
}

// finishLevels learns every value the label levels can take once pools, existing
// nodes and in-flight NodeClaims are known: per candidate, per pool with a
// chosen label, and per node.
func (s *solver) finishLevels() {
	for _, lv := range s.topo.labels {
		lv.cand = make([][][]int32, len(s.pools))
		lv.chosen = make([][]int32, len(s.pools))
		for _, pool := range s.pools {
			lv.cand[pool.idx] = make([][]int32, len(pool.cands))
			for z, cs := range pool.cands {
				vs := make([]int32, len(cs))
				for i := range cs {
					vs[i] = domAbsent
					if v, ok := s.candValue(lv.key, pool, z, &cs[i]); ok {
						vs[i] = s.value(lv, v)
					}
				}
				lv.cand[pool.idx][z] = vs
			}
			if _, fixed := pool.labels[lv.key]; fixed {
				continue
			}
			for _, r := range pool.custom {
				if r.Key == lv.key && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 1 {
					for _, v := range r.Values {
						lv.chosen[pool.idx] = append(lv.chosen[pool.idx], s.value(lv, v))
					}
				}
			}
		}
		for _, n := range s.nodes {
			if !n.existing {
				continue
			}
			n.ldom[lv.idx] = domAbsent
			if v, ok := n.labels[lv.key]; ok {
				n.ldom[lv.idx] = s.value(lv, v)
			}
		}
	}
}

// candValue is the value of key on a node of candidate c (as Prepared.nodeLabelsOf
// labels it: offering over pool over type).
func (s *solver) candValue(key string, pool *poolInfo, z int, c *cand) (string, bool) {
	switch key {
	case corev1.LabelTopologyZone:
		return s.zones[z], true
	case karpenter.CapacityTypeLabelKey:
		return c.ct, c.ct != ""
	case corev1.LabelTopologyRegion:
		r := catalog.RegionOfZone(s.zones[z])
		return r, r != ""
	case karpenter.LabelTopologyZoneID:
		id, ok := pool.zoneIDs[s.zones[z]]
		return id, ok
	}
	if v, ok := pool.labels[key]; ok {
		return v, true
	}
	v, ok := s.prep.labels[c.ti][key]
	return v, ok
}

// labelDomain is n's domain at label level lv were it on candidate idx (ignored
// for existing nodes): its pinned value, else its candidate's, else the value its
// pods' classes gave it; -1 when it has none yet (or carries none).
func (s *solver) labelDomain(lv *level, n *node, idx int) int32 {
	switch d := n.ldom[lv.idx]; {
	case d >= 0:
		return d
	case d == domAbsent:
		return -1
	}
	if v := lv.cand[n.pool.idx][n.z][idx]; v >= 0 {
		return v
	}
	if v, ok := n.extra[lv.key]; ok {
		return s.value(lv, v)
	}
	return -1
}

// pin fixes n's domain on lv before a pod that counts there is recorded. A
// value its candidate decides narrows the node to candidates with that value; a
// chosen one becomes a label of the node. allowed, when the pod is bound on lv,
// says which values it may take.
func (s *solver) pin(lv *level, n *node, allowed bitset) {
	if n.existing || n.ldom[lv.idx] != domUnpinned {
		return
	}
	d := s.labelDomain(lv, n, n.minIdx)
	if d < 0 {
		// A node of a pool that chooses always gets a value (chooseCustomLabels
		// would give it one at the end): never pin it as carrying none.
		chosen := lv.chosen[n.pool.idx]
		for _, v := range chosen {
			if allowed == nil || allowed.has(int(v)) {
				d = v
				break
			}
		}
		if d < 0 && len(chosen) > 0 {
			d = chosen[0]
		}
	}
	if d < 0 {
		d = domAbsent
	}
	n.ldom[lv.idx] = d
	s.applyPin(lv, n)
}

// applyPin narrows n to its pinned value on lv (again after the rebalancing pass
// recomputed its candidates and labels).
func (s *solver) applyPin(lv *level, n *node) {
	d := n.ldom[lv.idx]
	if d == domUnpinned {
		return
	}
	vs := lv.cand[n.pool.idx][n.z]
	if d >= 0 && vs[n.minIdx] < 0 {
		// A chosen value: the node is labelled with it.
		if n.extra == nil {
			n.extra = map[string]string{}
		}
		n.extra[lv.key] = lv.values[d]
		return
	}
	for i, v := range vs {
		if v != d {
			n.compat[i/64] &^= 1 << uint(i%64)
		}
	}
}

// chooseValue is the domain a new or planned node of pool takes on lv for a pod
// of class cls when its candidate does not decide: the class's own value for
// the key, else the first value the pool allows that mask admits; -1 if none.
func (s *solver) chooseValue(lv *level, pool *poolInfo, cls *podClass, extra map[string]string, mask bitset) int32 {
	if v, ok := extra[lv.key]; ok {
		return s.value(lv, v)
	}
	if v, ok := cls.perPool[pool.idx].extra[lv.key]; ok {
		return s.value(lv, v)
	}
	for _, v := range lv.chosen[pool.idx] {
		if mask.has(int(v)) {
			return v
		}
	}
	return -1
}

// newLdom returns a node's pins, all unpinned (nil when no label level exists).
func (s *solver) newLdom() []int32 {
	if len(s.topo.labels) == 0 {
		return nil
	}
	d := make([]int32, len(s.topo.labels))
	for i := range d {
		d[i] = domUnpinned
	}
	return d
}

// allCompat is a candidate set holding every candidate.
func allCompat(n int) []uint64 {
	c := make([]uint64, n)
	for i := range c {
		c[i] = math.MaxUint64
	}
	return c
}
