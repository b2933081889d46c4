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
}

func (x *slackIndex) remove(r slackRef) {
	if b := band(r.cpu); b < len(x.bands) && x.bands[b] != nil {
		x.bands[b].Delete(r)
	}
}

// descend calls fn on the nodes with the most free memory first (slackLess
// reversed, across bands) until fn returns false.
func (x *slackIndex) descend(fn func(slackRef) bool) {
	// Merge the bands' descending walks: each band's next node is fetched
	// one at a time, so stopping early costs no more than it looked at.
	type head struct {
		r  slackRef
		ok bool
	}
	heads := make([]head, len(x.bands))
	next := func(b int, below *slackRef) {
		heads[b].ok = false
		t := x.bands[b]
		if t == nil {
			return
		}
		f := func(r slackRef) bool {
			if below != nil && !slackLess(r, *below) {
				return true // the bound itself
			}
			heads[b] = head{r, true}
			return false
		}
		if below == nil {
			t.Descend(f)
		} else {
			t.DescendLessOrEqual(*below, f)
		}
	}
	for b := range x.bands {
		next(b, nil)
	}
	for {
		best := -1
		for b := range heads {
			if heads[b].ok && (best < 0 || slackLess(heads[best].r, heads[b].r)) {
				best = b
			}
		}
		if best < 0 || !fn(heads[best].r) {
			return
		}
		r := heads[best].r
		next(best, &r)
	}
}
