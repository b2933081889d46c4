package replay

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
)

// healthTimeLayout is how AWS Health writes times.
const healthTimeLayout = "Mon, 02 Jan 2006 15:04:05 GMT"

var instanceIDPattern = regexp.MustCompile(`\bi-[0-9a-f]{8,17}\b`)

// envelope is an EventBridge event as a Lambda target receives it.
func (r *run) envelope(source, detailType string, resources []string, detail any) []byte {
	if resources == nil {
		resources = []string{}
	}
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": r.newID(), "detail-type": detailType, "source": source,
		"account": r.account, "time": r.clock.Now().Format(time.RFC3339),
		"region": r.sim.Region(), "resources": resources, "detail": detail,
	})
	return b
}

// newID is a fresh, deterministic event id.
func (r *run) newID() string {
	r.ids++
	return fmt.Sprintf("00000000-7e91-4a1e-9000-%012d", r.ids)
}

// scheduled is the Scheduled Event a rate rule sends its target.
func (r *run) scheduled(function string) []byte {
	arn := fmt.Sprintf("arn:aws:events:%s:%s:rule/joiner-%s-%s", r.sim.Region(), r.account, r.sc.Cluster, function)
	return r.envelope(events.SourceEvents, events.DetailTypeScheduled, []string{arn}, map[string]any{})
}

// rewrite turns a sample event into this moment's delivery: time now, a fresh id
// (unless keepID), the region and account of the simulated AWS, the sample's instance
// IDs replaced by ids (in order of first appearance), and an AWS Health window moved
// relative to now.
func (r *run) rewrite(raw []byte, keepID bool, ids []string, win *Window) ([]byte, error) {
	if len(ids) > 0 {
		seen := map[string]string{}
		raw = instanceIDPattern.ReplaceAllFunc(raw, func(m []byte) []byte {
			if to, ok := seen[string(m)]; ok {
				return []byte(to)
			}
			if len(seen) >= len(ids) {
				return m
			}
			seen[string(m)] = ids[len(seen)]
			return []byte(seen[string(m)])
		})
	}
	ev, err := eventObject(raw)
	if err != nil {
		return nil, err
	}
	ev["time"] = r.clock.Now().Format(time.RFC3339)
	if !keepID {
		ev["id"] = r.newID()
	}
	ev["region"], ev["account"] = r.sim.Region(), r.account
	if d, ok := ev["detail"].(map[string]any); ok {
		if _, health := d["eventTypeCategory"]; health {
			d["eventRegion"] = r.sim.Region()
			if win != nil {
				d["startTime"] = r.clock.Now().Add(win.StartIn.D()).UTC().Format(healthTimeLayout)
				d["endTime"] = r.clock.Now().Add(win.EndIn.D()).UTC().Format(healthTimeLayout)
			}
		}
	}
	return json.Marshal(ev)
}

// healthEvent is an AWS Health scheduled retirement of the instances.
func (r *run) healthEvent(ids []string, h *HealthEvent) []byte {
	now := r.clock.Now().UTC()
	entities := make([]map[string]string, len(ids))
	for i, id := range ids {
		entities[i] = map[string]string{"entityValue": id}
	}
	detail := map[string]any{
		"eventArn":          fmt.Sprintf("arn:aws:health:%s::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/%s", r.sim.Region(), r.newID()),
		"service":           events.HealthServiceEC2,
		"eventScopeCode":    "ACCOUNT_SPECIFIC",
		"eventRegion":       r.sim.Region(),
		"eventTypeCode":     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
		"eventTypeCategory": events.HealthCategoryScheduledChange,
		"lastUpdatedTime":   now.Format(healthTimeLayout),
		"startTime":         now.Add(h.StartIn.D()).Format(healthTimeLayout),
		"endTime":           now.Add(h.EndIn.D()).Format(healthTimeLayout),
		"eventDescription": []map[string]string{{"language": "en_US",
			"latestDescription": "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance. We will stop your instance after the start time shown."}},
		"affectedEntities": entities,
	}
	return r.envelope(events.SourceHealth, events.DetailTypeHealth, ids, detail)
}

// pendingPods is the forwarder's batch: Pending Pods entries wrapped as EventBridge
// delivers them to the provisioner.
func (r *run) pendingPods(pods []events.PendingPod) ([][]byte, error) {
	r.batches++
	entries, err := events.BuildPendingPods(r.sc.Cluster, fmt.Sprintf("%s/%s/%d", r.sc.Cluster, r.clock.Now().Format(time.RFC3339), r.batches),
		r.clock.Now(), pods, events.BatchOptions{})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(entries))
	for _, e := range entries {
		out = append(out, r.envelope(e.Source, e.DetailType, e.Resources, json.RawMessage(e.Detail)))
	}
	return out, nil
}

// routes returns the functions whose rules match an event.
func routes(raw []byte) ([]string, error) {
	var out []string
	for _, rt := range []struct {
		fn string
		p  events.Pattern
	}{
		{handlers.Interruption, events.InterruptionEC2Pattern()},
		{handlers.Interruption, events.InterruptionHealthPattern()},
		{handlers.Provisioner, events.PendingPodsPattern()},
	} {
		ok, err := rt.p.Matches(raw)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, rt.fn)
		}
	}
	return out, nil
}
