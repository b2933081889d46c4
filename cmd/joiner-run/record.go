package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
	"github.com/joiner-autoscaler/joiner/shared/replay"
)

func init() {
	register(cli.Command{Name: "record", Summary: cli.RunSummary("record"), Run: runRecord})
}

const recordUsage = `usage: joiner record --out DIR (--queue URL [--duration D | --max N] | --from FILE)
                     (--kubeconfig FILE [--context NAME] | -f PATH...) [--cluster NAME] [--description TEXT] [--remap-instances]
                     [--snapshot-every D]
       joiner record --out DIR --kubeconfig FILE [--context NAME] --snapshot-every D [--duration D]
Writes DIR/scenario.yaml and DIR/events/NNNN-<detail-type>.json, one timeline step per event at
its offset from the first. --queue long-polls an SQS queue the stack's rules also deliver to
(-c recordQueue=true); messages are deleted only once the scenario is written. --from reads a
file of EventBridge events, one JSON object a line (CloudWatch Logs {"message": "..."} lines too).
--kubeconfig snapshots NodePools, EC2NodeClasses, Nodes, Pods, DaemonSets and PDBs into
DIR/cluster.yaml as the scenario's initial cluster; -f names manifests instead (or as well).
Replay it with: joiner replay DIR
--snapshot-every D also appends, every D while it records, the cluster's NodeClaims (type, pool,
zone, capacity type, instance, created, deleting, disruption reason) and pod waits to
DIR/snapshots.jsonl, one JSON object a line; without --queue it records only those, for
--duration or until Ctrl-C. Compare them with Joiner's shadow decisions:
joiner shadow report --snapshots DIR/snapshots.jsonl --decisions FILE`

// recorded is one event received.
type recorded struct {
	raw  []byte
	id   string
	kind string // detail-type
	at   time.Time
}

type recordFlags struct {
	paths                                                                   cli.PathList
	out, queue, from, kubeconfig, kubeContext, cluster, description, region string
	duration, snapshotEvery                                                 time.Duration
	max                                                                     int
	remap                                                                   bool
}

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f recordFlags
	fs.StringVar(&f.out, "out", "", "scenario folder to write (created; must not hold a scenario.yaml yet)")
	fs.StringVar(&f.queue, "queue", "", "SQS queue URL to long-poll (AWS credentials from the SDK default chain)")
	fs.StringVar(&f.from, "from", "", "JSON-lines file of EventBridge events instead of a queue (- for stdin)")
	fs.DurationVar(&f.duration, "duration", 0, "with --queue: stop after this long (default: until --max or Ctrl-C)")
	fs.IntVar(&f.max, "max", 0, "with --queue: stop after this many events")
	fs.StringVar(&f.region, "region", "", "with --queue: AWS region (default $AWS_REGION)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "snapshot this cluster's NodePools, EC2NodeClasses, Nodes, Pods, DaemonSets and PDBs into cluster.yaml")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: its current-context)")
	fs.Var(&f.paths, "f", "manifests (file or folder, repeatable) the scenario starts from, referenced from scenario.yaml")
	fs.StringVar(&f.cluster, "cluster", "", "cluster name (default: the Pending Pods batches' cluster, then $JOINER_CLUSTER_NAME)")
	fs.StringVar(&f.description, "description", "", "the scenario's description")
	fs.DurationVar(&f.snapshotEvery, "snapshot-every", 0, "with --kubeconfig: append a snapshot of the NodeClaims and pod waits to DIR/snapshots.jsonl this often")
	fs.BoolVar(&f.remap, "remap-instances", false, "replay EC2 and AWS Health events against instances Joiner launched in the replay (the recorded IDs do not exist there)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, recordUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := f.check(fs.NArg()); err != nil {
		fmt.Fprintf(stderr, "joiner record: %v\n", err)
		fs.Usage()
		return 2
	}
	// A failed recording leaves no half-written scenario behind: what this run
	// created (the folder, or its events/ inside a folder that was there) goes again.
	created := f.out
	if _, err := os.Stat(f.out); err == nil {
		created = filepath.Join(f.out, "events")
		if _, err := os.Stat(created); err == nil {
			created = ""
		}
	}
	undo := func() {
		if created != "" {
			_ = os.RemoveAll(created)
		}
	}
	dirs := filepath.Join(f.out, "events")
	if f.queue == "" && f.from == "" {
		dirs = f.out // snapshots only
	}
	if err := os.MkdirAll(dirs, 0o755); err != nil {
		fmt.Fprintf(stderr, "joiner record: %v\n", err)
		undo()
		return 1
	}
	var (
		evs []recorded
		in  *inbox
		err error
	)
	if f.snapshotEvery > 0 {
		snaps, err := startSnapshots(ctx, f, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "joiner record: %v\n", err)
			undo()
			return 1
		}
		// From here a failed recording keeps the snapshots taken: they are the
		// day's record of what the cluster's autoscaler did.
		created = ""
		if f.queue == "" {
			waitFor(ctx, f.duration)
			n, failed := snaps.stop()
			fmt.Fprintf(stdout, "%d snapshot(s) of the cluster in %s (%d failed read(s))\ncompare with: joiner shadow report --snapshots %s --decisions FILE\n",
				n, snaps.path, failed, snaps.path)
			return 0
		}
		defer func() {
			n, failed := snaps.stop()
			fmt.Fprintf(stderr, "joiner record: %d snapshot(s) of the cluster in %s (%d failed read(s))\n", n, snaps.path, failed)
		}()
	}
	if f.from != "" {
		evs, err = readEventLines(f.from, stderr)
	} else {
		in, err = receiveQueue(ctx, f, stderr)
		if in != nil {
			evs = in.events
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "joiner record: %v\n", err)
		undo()
		return 1
	}
	sum, err := writeScenario(context.WithoutCancel(ctx), f, evs, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "joiner record: %v\n", err)
		undo()
		if in != nil {
			if rerr := in.release(); rerr != nil {
				fmt.Fprintf(stderr, "joiner record: the messages stay invisible until their timeout: %v\n", rerr)
			}
		}
		return 1
	}
	// Only now that the scenario is on disk may the queue forget the events.
	if in != nil {
		if err := in.delete(); err != nil {
			fmt.Fprintf(stderr, "joiner record: the scenario is written, but deleting the messages failed (they will be received again): %v\n", err)
			return 1
		}
	}
	fmt.Fprint(stdout, sum)
	return 0
}

func (f *recordFlags) check(extra int) error {
	switch {
	case extra > 0:
		return errors.New("unexpected arguments")
	case f.out == "":
		return errors.New("--out DIR is required")
	case f.snapshotEvery < 0:
		return errors.New("--snapshot-every must not be negative")
	case f.snapshotEvery > 0 && f.kubeconfig == "":
		return errors.New("--snapshot-every needs --kubeconfig (the cluster to snapshot)")
	case f.snapshotEvery > 0 && f.from != "":
		return errors.New("--snapshot-every records while a queue is read or for --duration, not from a file (--from)")
	case f.snapshotEvery > 0 && f.queue == "":
		if f.max != 0 {
			return errors.New("--max is for --queue")
		}
		if f.duration < 0 {
			return errors.New("--duration must not be negative")
		}
		if _, err := os.Stat(filepath.Join(f.out, snapshotsFile)); err == nil {
			return fmt.Errorf("%s already holds a %s; record into a new folder", f.out, snapshotsFile)
		}
		return nil
	case (f.queue == "") == (f.from == ""):
		return errors.New("give exactly one of --queue URL and --from FILE")
	case f.from != "" && (f.duration != 0 || f.max != 0):
		return errors.New("--duration and --max are for --queue")
	case f.max < 0 || f.duration < 0:
		return errors.New("--duration and --max must not be negative")
	case f.kubeContext != "" && f.kubeconfig == "":
		return errors.New("--context needs --kubeconfig")
	case f.kubeconfig == "" && len(f.paths) == 0:
		return errors.New("the replay needs the cluster's NodePools: --kubeconfig (a snapshot) or -f manifests")
	}
	for _, name := range []string{replay.ScenarioFile, snapshotsFile} {
		if _, err := os.Stat(filepath.Join(f.out, name)); err == nil && (name != snapshotsFile || f.snapshotEvery > 0) {
			return fmt.Errorf("%s already holds a %s; record into a new folder", f.out, name)
		}
	}
	return nil
}

// parseEvent reads one EventBridge event, unwrapping a CloudWatch Logs record
// ({"message": "<event JSON>"}) when that is what it is.
func parseEvent(raw []byte) (recorded, error) {
	var env struct {
		ID         string          `json:"id"`
		DetailType string          `json:"detail-type"`
		Source     string          `json:"source"`
		Time       string          `json:"time"`
		Detail     json.RawMessage `json:"detail"`
		Message    *string         `json:"message"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return recorded{}, fmt.Errorf("not an event: %v", jsonerr.Describe(raw, err))
	}
	if env.Message != nil && env.DetailType == "" {
		return parseEvent([]byte(*env.Message))
	}
	if env.DetailType == "" || env.Source == "" || env.Time == "" || env.Detail == nil {
		return recorded{}, errors.New("not an EventBridge event (want id, source, detail-type, time and detail)")
	}
	at, err := time.Parse(time.RFC3339, env.Time)
	if err != nil {
		return recorded{}, fmt.Errorf("time %q: want RFC 3339", env.Time)
	}
	return recorded{raw: bytes.TrimSpace(raw), id: env.ID, kind: env.DetailType, at: at}, nil
}

// readEventLines reads a JSON-lines file; lines that are not events (other log
// records) are skipped with a warning naming the line.
func readEventLines(path string, stderr io.Writer) ([]recorded, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []recorded
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 4<<20) // EventBridge events are at most 256 KB
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev, err := parseEvent(append([]byte(nil), line...))
		if err != nil {
			fmt.Fprintf(stderr, "joiner record: %s:%d: %v; skipped\n", path, n, err)
			continue
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// sqsAPI is what recording calls on SQS.
type sqsAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// inbox is what was received from the queue: the events (one per event id) and the
// latest receipt handle of every message, duplicates included. The messages stay
// invisible, not deleted, until the scenario is written: a crash loses nothing (they
// come back after the visibility timeout), a failed write releases them at once.
type inbox struct {
	q        sqsAPI
	url      string
	events   []recorded
	receipts map[string]string // message id -> receipt handle
}

// receiveQueue long-polls the queue until --duration, --max or Ctrl-C.
func receiveQueue(ctx context.Context, f recordFlags, stderr io.Writer) (*inbox, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if f.region != "" {
		opts = append(opts, awsconfig.WithRegion(f.region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	return receive(ctx, sqs.NewFromConfig(cfg), f, stderr)
}

// maxVisibility is SQS's longest visibility timeout; a message received again after
// it is recognised by its event id.
const maxVisibility = 12 * time.Hour

func receive(ctx context.Context, q sqsAPI, f recordFlags, stderr io.Writer) (*inbox, error) {
	var deadline time.Time
	if f.duration > 0 {
		deadline = time.Now().Add(f.duration)
	}
	in := &inbox{q: q, url: f.queue, receipts: map[string]string{}}
	seen := map[string]bool{}
	for f.max == 0 || len(in.events) < f.max {
		wait := int32(20)
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			wait = int32(min(20, max(1, left/time.Second)))
		}
		res, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queue), MaxNumberOfMessages: 10,
			WaitTimeSeconds: wait, VisibilityTimeout: int32(maxVisibility / time.Second)})
		if ctx.Err() != nil {
			break // Ctrl-C: keep what was received
		}
		if err != nil {
			_ = in.release()
			return nil, fmt.Errorf("receive from %s: %w", f.queue, err)
		}
		for _, m := range res.Messages {
			ev, err := parseEvent([]byte(aws.ToString(m.Body)))
			if err != nil {
				fmt.Fprintf(stderr, "joiner record: message %s: %v; left in the queue\n", aws.ToString(m.MessageId), err)
				continue
			}
			in.receipts[aws.ToString(m.MessageId)] = aws.ToString(m.ReceiptHandle)
			if seen[ev.id] && ev.id != "" {
				continue // SQS delivers at least once: one copy is the event
			}
			seen[ev.id] = true
			in.events = append(in.events, ev)
		}
	}
	return in, nil
}

// delete removes every message received.
func (in *inbox) delete() error {
	return in.batches(func(ids, handles []string) ([]sqstypes.BatchResultErrorEntry, error) {
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(ids))
		for i := range ids {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(ids[i]), ReceiptHandle: aws.String(handles[i])}
		}
		res, err := in.q.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(in.url), Entries: entries})
		if err != nil {
			return nil, err
		}
		return res.Failed, nil
	})
}

// release makes every message received visible again, for the next recording.
func (in *inbox) release() error {
	return in.batches(func(ids, handles []string) ([]sqstypes.BatchResultErrorEntry, error) {
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(ids))
		for i := range ids {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(ids[i]), ReceiptHandle: aws.String(handles[i])}
		}
		res, err := in.q.ChangeMessageVisibilityBatch(context.Background(), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(in.url), Entries: entries})
		if err != nil {
			return nil, err
		}
		return res.Failed, nil
	})
}

// batches calls do with the receipt handles ten at a time (SQS's batch limit).
func (in *inbox) batches(do func(ids, handles []string) ([]sqstypes.BatchResultErrorEntry, error)) error {
	handles := make([]string, 0, len(in.receipts))
	for _, h := range in.receipts {
		handles = append(handles, h)
	}
	var errs []error
	for i := 0; i < len(handles); i += 10 {
		chunk := handles[i:min(i+10, len(handles))]
		ids := make([]string, len(chunk))
		for j := range chunk {
			ids[j] = fmt.Sprint(j)
		}
		failed, err := do(ids, chunk)
		if err != nil {
			errs = append(errs, err)
		}
		for _, e := range failed {
			errs = append(errs, fmt.Errorf("%s: %s", aws.ToString(e.Code), aws.ToString(e.Message)))
		}
	}
	return errors.Join(errs...)
}

// replayRoutes are the rules a recorded event may be replayed through (the stack's
// patterns); scheduled events are left out, as the replay runs the schedules itself.
var replayRoutes = []events.Pattern{events.InterruptionEC2Pattern(), events.InterruptionHealthPattern(), events.PendingPodsPattern()}

func routable(raw []byte) bool {
	for _, p := range replayRoutes {
		if ok, _ := p.Matches(raw); ok {
			return true
		}
	}
	return false
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// writeScenario writes the events and scenario.yaml (and cluster.yaml), then loads
// the scenario back as `joiner replay` will, so a recording that would not replay
// fails here. It returns the summary for stdout.
func writeScenario(ctx context.Context, f recordFlags, all []recorded, stderr io.Writer) (string, error) {
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	var evs []recorded
	scheduled, other := 0, 0
	for _, ev := range all {
		switch {
		case ev.kind == events.DetailTypeScheduled:
			scheduled++
		case !routable(ev.raw):
			other++
			fmt.Fprintf(stderr, "joiner record: event %s (%s) matches none of the stack's rules; skipped\n", ev.id, ev.kind)
		default:
			evs = append(evs, ev)
		}
	}
	if len(evs) == 0 {
		return "", fmt.Errorf("no event to record (%d received, %d scheduled, %d matching no rule)", len(all), scheduled, other)
	}
	cluster := f.cluster
	if cluster == "" {
		cluster = clusterOfEvents(evs)
	}
	if cluster == "" {
		cluster = os.Getenv("JOINER_CLUSTER_NAME")
	}
	if cluster == "" {
		return "", errors.New("no cluster name: no Pending Pods batch names one; pass --cluster")
	}
	var manifests []string
	for _, p := range f.paths {
		// Relative to the scenario folder, as scenario.yaml resolves them.
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		outAbs, err := filepath.Abs(f.out)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(outAbs, abs)
		if err != nil {
			rel = abs
		}
		manifests = append(manifests, filepath.ToSlash(rel))
	}
	if f.kubeconfig != "" {
		n, err := snapshotCluster(ctx, f.kubeconfig, f.kubeContext, filepath.Join(f.out, "cluster.yaml"))
		if err != nil {
			return "", fmt.Errorf("cluster snapshot: %w", err)
		}
		manifests = append(manifests, "cluster.yaml")
		fmt.Fprintf(stderr, "joiner record: %d object(s) of the cluster written to cluster.yaml\n", n)
	}
	first := evs[0].at
	var y strings.Builder
	fmt.Fprintf(&y, "# Recorded by joiner record on %s: %d event(s) from %s.\n", time.Now().UTC().Format(time.RFC3339), len(evs), recordSource(f))
	if scheduled > 0 {
		fmt.Fprintf(&y, "# %d scheduled event(s) left out: the replay runs the provisioner sweep and the consolidator on its own schedule (settings).\n", scheduled)
	}
	desc := f.description
	if desc == "" {
		desc = fmt.Sprintf("Recorded %s to %s", first.Format(time.RFC3339), evs[len(evs)-1].at.Format(time.RFC3339))
	}
	last := evs[len(evs)-1].at.Sub(first)
	// Ten minutes after the last event let its launches, drains and consolidations play out.
	duration := (last + 10*time.Minute).Truncate(time.Minute)
	fmt.Fprintf(&y, "description: %s\ncluster: %s\nstart: %q\nduration: %s\n", jsonString(desc), jsonString(cluster), first.UTC().Format(time.RFC3339), duration)
	y.WriteString("manifests:\n")
	for _, m := range manifests {
		fmt.Fprintf(&y, "  - %s\n", jsonString(m))
	}
	y.WriteString("timeline:\n")
	counts := map[string]int{}
	for i, ev := range evs {
		name := fmt.Sprintf("events/%04d-%s.json", i+1, slug(ev.kind))
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, ev.raw, "", "  "); err != nil {
			return "", fmt.Errorf("event %s: %w", ev.id, err)
		}
		pretty.WriteByte('\n')
		if err := os.WriteFile(filepath.Join(f.out, name), pretty.Bytes(), 0o644); err != nil {
			return "", err
		}
		fmt.Fprintf(&y, "  - at: %s\n    event: %s\n    keepId: true\n", ev.at.Sub(first), name)
		if f.remap {
			if n := len(instanceIDs(ev.raw)); n > 0 {
				sel := "any"
				if ev.kind == events.DetailTypeSpotInterruption {
					sel = "spot"
				}
				fmt.Fprintf(&y, "    instances: {select: %s, count: %d}\n", sel, n)
			}
		}
		counts[ev.kind]++
	}
	y.WriteString("expect:\n  - errors: {max: 0}\n  - noOrphans: true\n")
	if err := os.WriteFile(filepath.Join(f.out, replay.ScenarioFile), []byte(y.String()), 0o644); err != nil {
		return "", err
	}
	sc, err := replay.Load(f.out)
	if err != nil {
		return "", fmt.Errorf("the recorded scenario does not load: %w", err)
	}
	paths := make([]string, len(sc.Manifests))
	for i, m := range sc.Manifests {
		paths[i] = sc.Path(m)
	}
	if _, err := replay.LoadManifests(paths...); err != nil {
		return "", fmt.Errorf("the scenario's manifests do not load: %w", err)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "recorded %d event(s) over %s into %s (cluster %s)\n", len(evs), last, f.out, cluster)
	for _, k := range sortedNames(counts) {
		fmt.Fprintf(&s, "  %4d  %s\n", counts[k], k)
	}
	if scheduled+other > 0 {
		fmt.Fprintf(&s, "left out: %d scheduled event(s), %d matching no rule\n", scheduled, other)
	}
	fmt.Fprintf(&s, "replay with: joiner replay %s\n", f.out)
	return s.String(), nil
}

func recordSource(f recordFlags) string {
	if f.queue != "" {
		return f.queue
	}
	return f.from
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var instanceIDRe = regexp.MustCompile(`\bi-[0-9a-f]{8,17}\b`)

func instanceIDs(raw []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range instanceIDRe.FindAll(raw, -1) {
		out[string(m)] = true
	}
	return out
}

// clusterOfEvents is the cluster the Pending Pods batches name.
func clusterOfEvents(evs []recorded) string {
	for _, ev := range evs {
		if ev.kind != events.DetailTypePendingPods {
			continue
		}
		var b struct {
			Detail struct {
				Cluster string `json:"cluster"`
			} `json:"detail"`
		}
		if json.Unmarshal(ev.raw, &b) == nil && b.Detail.Cluster != "" {
			return b.Detail.Cluster
		}
	}
	return ""
}
