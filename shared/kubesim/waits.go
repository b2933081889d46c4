package kubesim

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// Wait is how long one pod waited from creation (pending) until it ran.
type Wait struct {
	Pod     string        `json:"pod"`
	Created time.Time     `json:"created"`
	Bound   time.Time     `json:"bound,omitzero"`
	Wait    time.Duration `json:"wait"`
}

// waits keeps each pod's wait, by UID: a recreated pod is a new pod with its own wait.
type waits struct {
	open map[types.UID]Wait
	done []Wait
}

func newWaits() *waits { return &waits{open: map[types.UID]Wait{}} }

func (w *waits) pending(p *corev1.Pod) {
	if _, ok := w.open[p.UID]; !ok {
		w.open[p.UID] = Wait{Pod: facts.PodKey(p), Created: createdAt(p)}
	}
}

// keepOnly forgets pods no longer pending that never ran (deleted while waiting).
func (w *waits) keepOnly(pending []*corev1.Pod) {
	if len(w.open) == 0 {
		return
	}
	still := make(map[types.UID]bool, len(pending))
	for _, p := range pending {
		still[p.UID] = true
	}
	for uid := range w.open {
		if !still[uid] {
			delete(w.open, uid)
		}
	}
}

func (w *waits) bound(p *corev1.Pod, now time.Time) {
	rec, ok := w.open[p.UID]
	if !ok {
		rec = Wait{Pod: facts.PodKey(p), Created: createdAt(p)}
	}
	delete(w.open, p.UID)
	rec.Bound, rec.Wait = now, now.Sub(rec.Created)
	w.done = append(w.done, rec)
}

// Waits returns the pods that ran, in the order they were bound, and the pods still
// waiting with how long they have waited so far.
func (c *Cluster) Waits() (ran, waiting []Wait) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	ran = append([]Wait(nil), c.waits.done...)
	for _, w := range c.waits.open {
		w.Wait = now.Sub(w.Created)
		waiting = append(waiting, w)
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].Pod < waiting[j].Pod })
	return ran, waiting
}
