package packer

import corev1 "k8s.io/api/core/v1"

// Relaxation. A pod is first placed with everything it prefers honoured as if it
// were required. When no place satisfies that, the ladder below loosens one step
// at a time, in order, and the pod is tried again with what the step left in
// force, as Karpenter's Preferences.Relax does with its list of named steps. A pod
// that fails the last rung is unschedulable.

// attempt is what binds a pod on one rung of the ladder.
type attempt struct {
	// prefTerm is the preferred node-affinity term honoured as if required (an
	// index into podInfo.prefTerms, heaviest first); -1 for none.
	prefTerm int
	// keepPrefs makes the pod's other preferences bind: ScheduleAnyway spread,
	// preferred pod (anti-)affinity, and keeping off PreferNoSchedule taints.
	keepPrefs bool
	// othersSpread makes the hard spread constraints other pods own bind this pod
	// too where they would be judged, which keeps the final state within maxSkew
	// for pods that do not carry the constraint themselves.
	othersSpread bool

	// What tryPlace derives for the rung.
	hard *podClass // the class of the pod's required node selection alone
	// masks are the domains the pod's topology admits on each label level that
	// binds it (see labelMasks).
	masks []levelMask
	// launch caches canLaunch for the hard class, per (honorA, honorT): bit 0
	// known, bit 1 the answer.
	launch [4]uint8
	// views caches the zone spread counts one rung compares (see spreadView):
	// the first few in place, so that a rung allocates nothing for them.
	views     [4]spreadView
	nviews    int
	moreViews []spreadView
}

// binds reports whether the attempt enforces one of the pod's own terms.
func (a *attempt) binds(t ownTerm) bool { return !t.soft || a.keepPrefs }

// launches is canLaunch for the attempt's hard class, cached.
func (a *attempt) launches(s *solver, honorA, honorT bool) bool {
	k := 0
	if honorA {
		k |= 1
	}
	if honorT {
		k |= 2
	}
	if a.launch[k] == 0 {
		a.launch[k] = 1
		if s.canLaunch(a.hard, honorA, honorT) {
			a.launch[k] = 3
		}
	}
	return a.launch[k] == 3
}

// mask returns the domains the attempt admits on label level lv (nil: any).
func (a *attempt) mask(lv *level) bitset {
	for _, m := range a.masks {
		if m.lv == lv {
			return m.allowed
		}
	}
	return nil
}

// relaxStep is one named step of the ladder: relax loosens a for p, or reports
// false when the step has nothing left to loosen, so that the next step is tried.
// (It works on a copy: a pointer handed to a function value would move every
// attempt to the heap.)
type relaxStep struct {
	name  string
	relax func(p *podInfo, a attempt) (attempt, bool)
}

// ladder lists the steps in the order they are taken.
var ladder = [...]relaxStep{
	{"drop the heaviest preferred node-affinity term still kept", func(p *podInfo, a attempt) (attempt, bool) {
		if a.prefTerm < 0 {
			return a, false
		}
		if a.prefTerm++; a.prefTerm == len(p.prefTerms) {
			a.prefTerm = -1
		}
		return a, true
	}},
	{"drop the other preferences (ScheduleAnyway spread, preferred pod (anti-)affinity, PreferNoSchedule taints)", func(_ *podInfo, a attempt) (attempt, bool) {
		ok := a.keepPrefs
		a.keepPrefs = false
		return a, ok
	}},
	{"stop enforcing other pods' spread constraints", func(_ *podInfo, a attempt) (attempt, bool) {
		ok := a.othersSpread
		a.othersSpread = false
		return a, ok
	}},
}

// firstAttempt is the top rung: everything the pod prefers binds. Steps that
// would change nothing for this pod are left out.
func (s *solver) firstAttempt(p *podInfo) attempt {
	a := attempt{prefTerm: -1, keepPrefs: p.prefs || s.preferNoSchedule}
	if len(p.prefTerms) > 0 {
		a.prefTerm = 0
	}
	for _, g := range p.matched {
		if g.kind == kindSpread && g.hardOwned && !p.ownsHard(g) {
			a.othersSpread = true
			break
		}
	}
	return a
}

// relax returns the next rung below a: the first step that loosens anything
// for p, and that step's name ("" when nothing is left to relax).
func relax(p *podInfo, a attempt) (attempt, string) {
	for i := range ladder {
		if next, ok := ladder[i].relax(p, a); ok {
			return next, ladder[i].name
		}
	}
	return a, ""
}

// place tries p on every rung of the ladder in turn. With rec set, the last
// rung records why it found no place.
func (s *solver) place(p *podInfo, rec *rejections) bool {
	for a := s.firstAttempt(p); ; {
		next, step := relax(p, a)
		r := rec
		if step != "" {
			r = nil
		}
		if s.tryPlace(p, a, r) {
			return true
		}
		if step == "" {
			return false
		}
		a = next
	}
}

// podClass returns (caching on the pod) the class p is placed under on a rung:
// its required node selection, the preferred term the rung keeps, and whether
// PreferNoSchedule taints are refused.
func (s *solver) podClass(p *podInfo, a attempt) *podClass {
	k := classSlot{pref: a.prefTerm, strict: a.keepPrefs}
	for _, c := range p.classes {
		if c.slot == k {
			return c.cls
		}
	}
	var term *corev1.NodeSelectorTerm
	if a.prefTerm >= 0 {
		term = &p.prefTerms[a.prefTerm]
	}
	c := s.classFor(p.pod, term, a.keepPrefs)
	p.classes = append(p.classes, slotClass{k, c})
	return c
}

// hardClass is the class of p's required node selection alone.
func (s *solver) hardClass(p *podInfo) *podClass { return s.podClass(p, attempt{prefTerm: -1}) }

// spreadClass is the class spread counts domains by (nodeAffinityPolicy): the
// pod's own required node selection, without its volumes' topology.
func (s *solver) spreadClass(p *podInfo) *podClass {
	if p.orig == nil {
		return s.hardClass(p)
	}
	if p.origCls == nil {
		p.origCls = s.classFor(p.orig, nil, false)
	}
	return p.origCls
}

type classSlot struct {
	pref   int
	strict bool
}

type slotClass struct {
	slot classSlot
	cls  *podClass
}

func (p *podInfo) ownsHard(g *topoGroup) bool {
	for _, t := range p.own {
		if t.g == g && !t.soft {
			return true
		}
	}
	return false
}
