package packer

import (
	"math"
	"math/bits"

	"github.com/google/btree"
)

// slackIndex holds the nodes of one pool and zone (or the existing nodes of a
// zone) by free memory, in bands of free CPU: band b holds the nodes whose free
// millicores lie in [bandLow(b), bandLow(b+1)), each band a btree ordered by
// slackLess.
//
// One tree ordered by free memory made a pod walk past every node with memory
// to spare but too little CPU before it reached one that holds it, and the
// search looks at a fixed number of nodes (fitWindow, growWindow): at 20,000
// pods of Karpenter's mix the window spanned a fair slice of the nodes, at
// 100,000 (five times the nodes at each level of free memory) a fifth of it,
// so pods opened new nodes beside planned ones that had room, or could have
// grown for less (1.35x the bound against 1.05x). In a band whose every node
// has the pod's CPU free, the first node past the pod's memory holds it unless
// topology or labels refuse it, however many nodes there are.
type slackIndex struct {
	bands []*btree.BTreeG[slackRef]
	// all holds every node of the bands in one order, for top: merging the
	// bands' walks cost more than keeping it (a fifth more CPU on a small plan
	// under a binding limit, where most pods look for growth in vain).
	all *btree.BTreeG[slackRef]
}

// band is the band of a node with cpu millicores free: 0 below 128m, then one
// band per doubling.
func band(cpu int64) int {
	if cpu < 128 {
		return 0
	}
	return bits.Len64(uint64(cpu) >> 7)
}

// bandLow is the least free CPU of a node in band b.
func bandLow(b int) int64 {
	if b == 0 {
		return math.MinInt64
	}
	return 128 << (b - 1)
}

func (x *slackIndex) insert(r slackRef) {
	b := band(r.cpu)
	for len(x.bands) <= b {
		x.bands = append(x.bands, nil)
	}
	if x.bands[b] == nil {
		x.bands[b] = btree.NewG(16, slackLess)
	}
	x.bands[b].ReplaceOrInsert(r)
	if x.all == nil {
		x.all = btree.NewG(16, slackLess)
	}
	x.all.ReplaceOrInsert(r)
}

func (x *slackIndex) remove(r slackRef) {
	if b := band(r.cpu); b < len(x.bands) && x.bands[b] != nil {
		x.bands[b].Delete(r)
	}
	if x.all != nil {
		x.all.Delete(r)
	}
}

// top calls fn on the k nodes with the most free memory, most first.
func (x *slackIndex) top(k int, fn func(slackRef)) {
	if x.all == nil {
		return
	}
	x.all.Descend(func(r slackRef) bool {
		fn(r)
		k--
		return k > 0
	})
}
