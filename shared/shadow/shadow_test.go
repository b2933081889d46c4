package shadow

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
)

var t0 = time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }
func atp(d time.Duration) *time.Time {
	t := at(d)
	return &t
}

var prices = map[string]float64{
	"m5.large on-demand": 0.096, "t3.medium spot": 0.0125, "m5.xlarge on-demand": 0.192, "g5.xlarge on-demand": 0.5,
}

func price(t, _, ct string) (float64, bool) {
	p, ok := prices[t+" "+ct]
	return p, ok
}

// TestCompareMatchesLaunchesAndShiftsWaits: Karpenter launched an m5.xlarge for two
// pending pods 30 s after Joiner's shadow provisioner decided an m5.large for them:
// the two launches are matched, and on Joiner's side the pods wait 30 s less. Joiner
// removed the empty node three minutes before Karpenter did (a removal that
// differs), and launched a GPU node Karpenter never did (Joiner only). A pod
// placed on a node both had waits alike; a pod still pending waits alike. Costs are
// the nodes' lives in the window at one price table.
func TestCompareMatchesLaunchesAndShiftsWaits(t *testing.T) {
	a := NodeClaim{Name: "default-aaaaa", NodePool: "default", InstanceType: "m5.large", CapacityType: "on-demand", Zone: "us-east-1a", Node: "node-a", Created: at(-48 * time.Hour)}
	b := NodeClaim{Name: "default-bbbbb", NodePool: "default", InstanceType: "t3.medium", CapacityType: "spot", Zone: "us-east-1b", Node: "node-b", Created: at(-time.Hour)}
	k1 := NodeClaim{Name: "default-kkkkk", NodePool: "default", InstanceType: "m5.xlarge", CapacityType: "on-demand", Zone: "us-east-1a", Node: "node-k", Created: at(150 * time.Second)}
	var snaps []Snapshot
	for m := 0; m <= 10; m++ {
		s := Snapshot{At: at(time.Duration(m) * time.Minute), NodeClaims: []NodeClaim{a}}
		if m < 7 {
			bb := b
			if m == 6 {
				bb.Deleting, bb.Reason = atp(6*time.Minute), "Empty"
			}
			s.NodeClaims = append(s.NodeClaims, bb)
		}
		if m >= 3 {
			s.NodeClaims = append(s.NodeClaims, k1)
		}
		switch m {
		case 1:
			s.Pods = []PodWait{{Pod: "web/p3", Created: at(time.Minute), Scheduled: atp(70 * time.Second), Node: "node-a"}}
		case 2, 3:
			s.Pods = []PodWait{{Pod: "web/p1", Created: at(2 * time.Minute)}, {Pod: "web/p2", Created: at(2 * time.Minute)}}
		case 4:
			s.Pods = []PodWait{{Pod: "web/p1", Created: at(2 * time.Minute), Scheduled: atp(4 * time.Minute), Node: "node-k"},
				{Pod: "web/p2", Created: at(2 * time.Minute), Scheduled: atp(4 * time.Minute), Node: "node-k"}}
		case 10:
			s.Pods = []PodWait{{Pod: "web/p4", Created: at(9 * time.Minute)}}
		}
		snaps = append(snaps, s)
	}
	dec := &Decisions{List: []handlers.Decision{
		{Kind: handlers.DecideLaunch, At: at(2 * time.Minute), NodeClaim: "default-shadow1", NodePool: "default", InstanceType: "m5.large", CapacityType: "on-demand", Zone: "us-east-1a"},
		{Kind: handlers.DecideDeleteNodeClaim, At: at(3 * time.Minute), NodeClaim: "default-bbbbb", Reason: "Empty"},
		{Kind: handlers.DecideLaunch, At: at(5 * time.Minute), NodeClaim: "gpu-shadow2", NodePool: "gpu", InstanceType: "g5.xlarge", CapacityType: "on-demand", Zone: "us-east-1a"},
		{Kind: handlers.DecideDeleteNodeClaim, At: at(4 * time.Minute), NodeClaim: "default-bbbbb", Reason: "Empty"}, // a later round again
	}}
	r := Compare(snaps, dec, Options{Price: price})

	if len(r.Matched) != 1 || r.Matched[0].Karpenter.NodeClaim != k1.Name || r.Matched[0].Joiner.NodeClaim != "default-shadow1" {
		t.Fatalf("matched %+v", r.Matched)
	}
	if len(r.UnmatchedJoiner) != 1 || r.UnmatchedJoiner[0].NodeClaim != "gpu-shadow2" || len(r.UnmatchedKarpenter) != 0 {
		t.Errorf("unmatched: Joiner %+v, Karpenter %+v", r.UnmatchedJoiner, r.UnmatchedKarpenter)
	}
	if got := r.Karpenter.Launched[0].At; !got.Equal(k1.Created) {
		t.Errorf("Karpenter's launch at %s, want its creation time %s (between two snapshots)", got, k1.Created)
	}
	if len(r.Karpenter.Removed) != 1 || !r.Karpenter.Removed[0].At.Equal(at(6*time.Minute)) || r.Karpenter.Removed[0].Reason != "Empty" {
		t.Errorf("Karpenter removed %+v", r.Karpenter.Removed)
	}
	if len(r.Joiner.Removed) != 1 || !r.Joiner.Removed[0].At.Equal(at(3*time.Minute)) {
		t.Errorf("Joiner removed %+v (the repeated decision counts once)", r.Joiner.Removed)
	}
	if len(r.Removals) != 1 || r.Removals[0].NodeClaim != b.Name || r.Removals[0].Joiner == nil || r.Removals[0].Karpenter == nil {
		t.Errorf("removals that differ: %+v", r.Removals)
	}
	// Karpenter: a 10 min, b until gone at 7 min, k1 from 2m30s.
	wantK := 0.096*10/60 + 0.0125*7/60 + 0.192*7.5/60
	// Joiner: a 10 min, b until 3 min, its m5.large from 2 min, its g5 from 5 min.
	wantJ := 0.096*10/60 + 0.0125*3/60 + 0.096*8/60 + 0.5*5/60
	if math.Abs(r.Karpenter.Cost-wantK) > 1e-9 || math.Abs(r.Joiner.Cost-wantJ) > 1e-9 {
		t.Errorf("cost Karpenter $%.6f (want %.6f), Joiner $%.6f (want %.6f)", r.Karpenter.Cost, wantK, r.Joiner.Cost, wantJ)
	}
	if n := r.Karpenter.Series[5].Nodes; n != 3 {
		t.Errorf("Karpenter at 5m: %d nodes, want 3", n)
	}
	if n := r.Joiner.Series[5].Nodes; n != 3 { // a, its m5.large, its g5 (b gone at 3m)
		t.Errorf("Joiner at 5m: %d nodes, want 3", n)
	}
	// Waits: Karpenter 10s, 2m, 2m placed, 1m still pending; Joiner's two matched
	// pods 30 s sooner.
	k, j := r.Karpenter.Pods, r.Joiner.Pods
	if k.Placed != 3 || k.StillPending != 1 || k.WaitMax != 2*time.Minute || k.WaitP50 != time.Minute {
		t.Errorf("Karpenter pods %+v", k)
	}
	if j.Placed != 3 || j.StillPending != 1 || j.WaitMax != 90*time.Second || r.Joiner.NotComparable != 0 {
		t.Errorf("Joiner pods %+v, %d not comparable", j, r.Joiner.NotComparable)
	}
	var out bytes.Buffer
	Write(&out, r)
	for _, want := range []string{"nodes launched", "1 (1 m5.xlarge on-demand)", "2 (1 g5.xlarge on-demand, 1 m5.large on-demand)",
		"Joiner only", "both (differs)", "Karpenter removed it at 6m (Empty)", "Joiner removed it at 3m (Empty)", "p50 1m, p95 2m, max 2m", "max 1m30s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// Every form the decisions reach a user in is read, a decision logged twice counts
// once, and bad input names the file and line.
func TestReadDecisionsAndSnapshots(t *testing.T) {
	d := handlers.Decision{Kind: handlers.DecideLaunch, At: t0, NodeClaim: "default-shadow1", NodePool: "default", InstanceType: "m5.large"}
	dj, _ := json.Marshal(d)
	logLine := `{"time":"2026-12-04T03:00:00Z","level":"INFO","msg":"shadow decision","function":"provisioner","decision":` + string(dj) + `}`
	summary := `{"level":"INFO","msg":"decision","summary":{"function":"provisioner","mode":"shadow","shadow":[` + string(dj) + `]}}`
	cw, _ := json.Marshal(map[string]string{"message": logLine})
	d2 := d
	d2.NodeClaim, d2.At = "default-shadow2", t0.Add(time.Minute)
	d2j, _ := json.Marshal(d2)
	in := strings.Join([]string{logLine, summary, string(cw), `{"level":"INFO","msg":"leak"}`, string(d2j),
		`{"function":"consolidator","action":"x","shadow":[` + string(d2j) + `]}`}, "\n")
	got, err := ReadDecisions(strings.NewReader(in), "decisions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.List) != 2 || got.Skipped != 1 {
		t.Errorf("read %d decision(s), %d skipped: %+v", len(got.List), got.Skipped, got.List)
	}
	for _, tc := range []struct{ in, want string }{
		{logLine + "\n{oops", "decisions.jsonl:2: not JSON"},
		{`{"kind":"Launch","at":"2026-12-04T03:00:00Z"}` + "\n" + `{"msg":"shadow decision","decision":{"kind":"Launch"}}`, `decisions.jsonl:2: Launch decision without "at"`},
	} {
		if _, err := ReadDecisions(strings.NewReader(tc.in), "decisions.jsonl"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadDecisions: %v, want %q", err, tc.want)
		}
	}
	good := `{"at":"2026-12-04T03:00:00Z","nodeClaims":[{"name":"a","nodePool":"default","created":"2026-12-04T02:00:00Z"}]}`
	for _, tc := range []struct{ in, want string }{
		{"", "snapshots.jsonl: no snapshot in it"},
		{good + "\n[1,2]", "snapshots.jsonl:2: not a snapshot"},
		{good + "\n" + `{"at":"2026-12-04T03:01:00Z","nodeClaim":[]}`, "snapshots.jsonl:2: not a snapshot"},
		{`{"nodeClaims":[]}`, `snapshots.jsonl:1: snapshot without "at"`},
		{`{"at":"2026-12-04T03:00:00Z","nodeClaims":[{"nodePool":"x"}]}`, "snapshots.jsonl:1: nodeClaims[0] has no name"},
	} {
		if _, err := ReadSnapshots(strings.NewReader(tc.in), "snapshots.jsonl"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadSnapshots(%q): %v, want %q", tc.in, err, tc.want)
		}
	}
	if s, err := ReadSnapshots(strings.NewReader(good), "snapshots.jsonl"); err != nil || len(s) != 1 || s[0].NodeClaims[0].Name != "a" {
		t.Errorf("good snapshot: %v %v", s, err)
	}
}
