// Package disruption decides which of Joiner's nodes to remove or replace: empty
// and underutilised nodes (consolidation), nodes whose EC2NodeClass, NodePool or
// AMI changed (drift), nodes past their expireAfter (expiry), and leaked instances
// and NodeClaims (clean-up).
//
// It only decides. Decide reads a snapshot of the cluster and returns actions; an
// executor applies them to EC2 and Kubernetes. Nothing here performs I/O or reads
// the clock (the time is an input), and the same input always yields the same
// decision. Every "would these pods fit elsewhere?" question goes to packer.Solve,
// the engine the provisioner uses, so consolidation never removes capacity the
// provisioner would immediately buy back.
package disruption

import (
	"fmt"
	"time"

	policyv1 "k8s.io/api/policy/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Annotations the provisioner writes on every NodeClaim it creates, so drift can be
// detected by comparing them with the current objects. The *-hash-version
// annotations say which hash function wrote the hash. Karpenter writes its own hashes
// under its own versions (v3 for NodePools, v6 for EC2NodeClasses in v1.15); a hash of
// another version is never compared: HashStamps re-stamps it first, the way Karpenter
// itself moves between hash versions (see hashadopt.go).
const (
	NodeClassHashAnnotation        = "karpenter.k8s.aws/ec2nodeclass-hash"
	NodeClassHashVersionAnnotation = "karpenter.k8s.aws/ec2nodeclass-hash-version"
	NodePoolHashAnnotation         = "karpenter.sh/nodepool-hash"
	NodePoolHashVersionAnnotation  = "karpenter.sh/nodepool-hash-version"
	// HashVersion is the value Joiner writes into both *-hash-version annotations.
	HashVersion = "joiner-v1"
)

// Defaults for Options fields left zero.
const (
	DefaultMinSavingsFraction = 0.1
	DefaultMaxCandidates      = 100
	// DefaultMaxSimulations bounds the packing simulations of one decision. With the
	// default 10% budgets a round rarely needs more; the bound keeps a huge cluster's
	// decision inside a Lambda invocation. The remaining candidates are tried next round.
	DefaultMaxSimulations = 300
	// DefaultLeakGrace is how long an owned instance may exist without a NodeClaim:
	// the provisioner creates the NodeClaim before it launches, so only a crash
	// between the two or a failed rollback leaves one.
	DefaultLeakGrace = 5 * time.Minute
	// RegistrationTTL is how long a launched NodeClaim may go without its node
	// registering before it is given up (Karpenter's value).
	RegistrationTTL = 15 * time.Minute
	// spotToSpotMinOptions is Karpenter's minimum instance-type flexibility for a
	// single-node spot-to-spot replacement: fewer cheaper options would walk the
	// node down to the least available spot pools, one replacement at a time.
	spotToSpotMinOptions = 15
)

// Input is everything one decision looks at.
type Input struct {
	// Now is the decision time; Decide never reads the clock.
	Now time.Time
	// Snapshot is the cluster as it is: nodes with their bound pods, in-flight
	// NodeClaims, DaemonSets, NodePools, EC2NodeClasses and the catalog. Its Pods
	// are the pending pods. It is not modified.
	Snapshot *packer.Snapshot
	// NodeClaims are all NodeClaims, initialized or not, including deleting ones.
	NodeClaims []*karpenter.NodeClaim
	// PDBs are the cluster's PodDisruptionBudgets with their status.
	PDBs    []*policyv1.PodDisruptionBudget
	Options Options
}

// Options tune a decision. The zero value gives Karpenter's behaviour with a 10%
// minimum saving for replacements.
type Options struct {
	// MinSavingsFraction is the share of the current price a replacement must save
	// (0.1: the replacement costs at most 90% of what it replaces). Zero means
	// DefaultMinSavingsFraction; a negative value turns the fractional floor off.
	MinSavingsFraction float64
	// MinSavingsPerHour is an absolute floor in $/h; when both floors are set the
	// larger applies. Deletions always save their node's whole price and need neither.
	MinSavingsPerHour float64
	// MaxCandidates caps the nodes one multi-node consolidation may remove
	// (DefaultMaxCandidates when zero).
	MaxCandidates int
	// MaxSimulations caps packer.Solve calls per decision (DefaultMaxSimulations
	// when zero, unlimited when negative).
	MaxSimulations int
	// SpotToSpot allows replacing spot nodes with cheaper spot nodes, as Karpenter's
	// SpotToSpotConsolidation feature gate does (off by default there too).
	SpotToSpot bool
	// NodeClassHashAnnotation and NodePoolHashAnnotation override the annotation
	// keys drift compares (NodeClassHashAnnotation and NodePoolHashAnnotation).
	NodeClassHashAnnotation string
	NodePoolHashAnnotation  string
	// Packer is passed to every packer.Solve.
	Packer packer.Options
	// Deadline bounds the search in time: no packing simulation starts at or after
	// it, and the candidates not tried wait for the next round (Blocked with
	// BlockSimulationLimit, Summary.SearchStopped saying so). Zero means no time
	// limit. The time is read from Clock, never from the system: Decide stays a pure
	// function of its input, and tests drive the limit with a fake clock.
	//
	// The round's time is shared so that a long search in one method does not starve
	// the ones after it: expiry and drift may use the first half; the one simulation
	// that removes every empty node at once runs whatever time is left (it is the
	// surest saving, and usually needs no simulation at all); multi-node
	// consolidation may use half of what remains when it starts, so single-node
	// consolidation always gets to try the cheapest-to-disrupt candidates first.
	Deadline time.Time
	// Clock reads the current time for Deadline (the handler passes time.Now). A
	// Deadline without a Clock is ignored with a warning.
	Clock func() time.Time

	// fullView turns the compact view off (tests compare the two).
	fullView bool
}

// ActionKind says what the executor does.
type ActionKind string

// Action kinds.
const (
	// MarkEmpty sets the NodeClaim's Empty condition to True with
	// lastTransitionTime EmptySince, so the emptiness timer survives between rounds.
	MarkEmpty ActionKind = "MarkEmpty"
	// ClearEmpty sets a stale Empty condition to False: the node has pods again, and
	// the next time it empties its timer must start afresh.
	ClearEmpty ActionKind = "ClearEmpty"
	// MarkDrifted sets the NodeClaim's Drifted condition to True with
	// DriftedReason (Karpenter's reason names), as Karpenter's drift controller
	// does: kubectl shows it, and a Karpenter taking the cluster back reads it.
	MarkDrifted ActionKind = "MarkDrifted"
	// ClearDrifted removes a Drifted condition of one of those reasons from a
	// NodeClaim no longer drifted.
	ClearDrifted ActionKind = "ClearDrifted"
	// Delete taints, drains and deletes the node: its pods fit on other capacity.
	Delete ActionKind = "Delete"
	// Replace launches the replacement first, waits for it to be ready, then taints,
	// drains and deletes the node.
	Replace ActionKind = "Replace"
)

// Reason says why a node is disrupted; the first three match Karpenter's budget
// reasons.
type Reason string

// Disruption reasons.
const (
	ReasonEmpty         = Reason(karpenter.DisruptionReasonEmpty)
	ReasonUnderutilized = Reason(karpenter.DisruptionReasonUnderutilized)
	ReasonDrifted       = Reason(karpenter.DisruptionReasonDrifted)
	// ReasonExpired is forceful: NodePool budgets do not limit it (as in Karpenter v1).
	ReasonExpired Reason = "Expired"
)

// Action is one thing for the executor to do to one node.
//
// Disruptions (Delete, Replace) come in commands: every action with the same
// Command number is one unit. The executor launches the unit's replacements (set
// on the unit's first action only, so each is launched once), waits until they
// are ready, then disrupts all the unit's nodes; if a replacement fails, it
// abandons the whole unit. Actions are listed in the order they were decided:
// later decisions assumed the earlier ones happen.
type Action struct {
	Kind      ActionKind `json:"kind"`
	Reason    Reason     `json:"reason,omitempty"`
	Command   int        `json:"command,omitempty"`
	NodeClaim string     `json:"nodeClaim"`
	Node      string     `json:"node"`
	NodePool  string     `json:"nodePool"`
	// Replacement is the node to launch before this unit's nodes are drained. Its
	// Options are only instance types cheap enough to keep the promised saving.
	Replacement *packer.NewNode `json:"replacement,omitempty"`
	// AdditionalReplacements are further nodes a drifted or expired node's pods need
	// (consolidation never uses more than one).
	AdditionalReplacements []packer.NewNode `json:"additionalReplacements,omitempty"`
	// SavingsPerHour is this node's share of the unit's saving in $/h: its price
	// less its share of the replacement's price. Drift and expiry may cost money.
	SavingsPerHour float64 `json:"savingsPerHour"`
	// EmptySince is set on MarkEmpty: when the node became empty, as far as the
	// snapshot shows.
	EmptySince *time.Time `json:"emptySince,omitempty"`
	// DriftedReason is set on MarkDrifted: NodePoolDrifted, NodeClassDrift,
	// AMIDrift or RequirementsDrifted.
	DriftedReason string `json:"driftedReason,omitempty"`
	// Forceful is set on an expired node whose terminationGracePeriod has run out
	// since it expired: the executor may drain it past do-not-disrupt and PDBs
	// (its grace deadline is Now).
	Forceful    bool   `json:"forceful,omitempty"`
	Explanation string `json:"explanation"`
}

// BlockCode classifies why a node that would otherwise be disrupted is left alone.
type BlockCode string

// Block codes.
const (
	BlockDoNotDisrupt    BlockCode = "DoNotDisrupt"
	BlockPDB             BlockCode = "PodDisruptionBudget"
	BlockBudget          BlockCode = "Budget"
	BlockUnschedulable   BlockCode = "PodsUnschedulable"
	BlockUnconsolidable  BlockCode = "Unconsolidatable"
	BlockNotCandidate    BlockCode = "NotCandidate"
	BlockSimulationLimit BlockCode = "SimulationLimit"
)

// Blocked is a node left alone this round and why.
type Blocked struct {
	Node      string    `json:"node"`
	NodeClaim string    `json:"nodeClaim,omitempty"`
	NodePool  string    `json:"nodePool,omitempty"`
	Code      BlockCode `json:"code"`
	// Reason names the cause: the PDB, the pod, the budget.
	Reason string `json:"reason"`
}

// Decision is what Decide returns.
type Decision struct {
	Actions []Action  `json:"actions"`
	Blocked []Blocked `json:"blocked"`
	// Warnings are problems with the input (a bad budget, an unknown price) that
	// made the decision more conservative.
	Warnings []string `json:"warnings,omitempty"`
	Summary  Summary  `json:"summary"`
}

// Summary counts what a decision looked at and chose.
type Summary struct {
	Nodes          int     `json:"nodes"`
	Managed        int     `json:"managed"`
	Candidates     int     `json:"candidates"`
	Simulations    int     `json:"simulations"`
	Deletes        int     `json:"deletes"`
	Replaces       int     `json:"replaces"`
	MarkEmpty      int     `json:"markEmpty"`
	ClearEmpty     int     `json:"clearEmpty"`
	Empty          int     `json:"empty"`
	Underutilized  int     `json:"underutilized"`
	Drifted        int     `json:"drifted"`
	Expired        int     `json:"expired"`
	Blocked        int     `json:"blocked"`
	SavingsPerHour float64 `json:"savingsPerHour"`
	// SearchStopped names the limit that ended the search early ("simulation
	// limit (300)" or "time limit (30s)"), empty when every candidate was tried.
	SearchStopped string `json:"searchStopped,omitempty"`
}

// String is the one-line summary a handler logs.
func (s Summary) String() string {
	out := fmt.Sprintf("%d nodes (%d managed, %d candidates): %d delete, %d replace (empty %d, underutilized %d, drifted %d, expired %d), "+
		"%d blocked, saving $%.4f/h; %d simulations",
		s.Nodes, s.Managed, s.Candidates, s.Deletes, s.Replaces, s.Empty, s.Underutilized, s.Drifted, s.Expired,
		s.Blocked, s.SavingsPerHour, s.Simulations)
	if s.SearchStopped != "" {
		out += "; search stopped by the " + s.SearchStopped
	}
	return out
}

// Commands groups the disruption actions by command, in order; the condition
// actions (MarkEmpty, ClearEmpty, MarkDrifted, ClearDrifted) are left out.
func (d Decision) Commands() [][]Action {
	var out [][]Action
	idx := map[int]int{}
	for _, a := range d.Actions {
		if a.Kind != Delete && a.Kind != Replace {
			continue
		}
		i, ok := idx[a.Command]
		if !ok {
			i = len(out)
			idx[a.Command] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], a)
	}
	return out
}
