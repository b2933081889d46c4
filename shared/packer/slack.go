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
	// buf and heads are top's scratch space: each band's first nodes, and
	// where in buf each band's next one and its end are.
	buf   []slackRef
	heads [][2]int
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

// top calls fn on the k nodes with the most free memory, most first
// (slackLess reversed, across bands): the first k of each band, merged.
func (x *slackIndex) top(k int, fn func(slackRef)) {
	x.buf = x.buf[:0]
	x.heads = x.heads[:0]
	for _, t := range x.bands {
		start := len(x.buf)
		if t != nil {
			t.Descend(func(r slackRef) bool {
				x.buf = append(x.buf, r)
				return len(x.buf)-start < k
			})
		}
		x.heads = append(x.heads, [2]int{start, len(x.buf)})
	}
	for ; k > 0; k-- {
		best := -1
		for b, h := range x.heads {
			if h[0] < h[1] && (best < 0 || slackLess(x.buf[x.heads[best][0]], x.buf[h[0]])) {
				best = b
			}
		}
		if best < 0 {
			return
		}
		r := x.buf[x.heads[best][0]]
		x.heads[best][0]++
		fn(r)
	}
}
