package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// AWS public prices in us-east-1 (on-demand, no free tier counted), as listed on
// aws.amazon.com/lambda/pricing, /eventbridge/pricing, /sqs/pricing and
// /cloudwatch/pricing. They price the control plane a replay ran, at its rate.
const (
	// Lambda on arm64 (Graviton): $0.0000133334 per GB-second, $0.20 per million requests.
	priceLambdaGBSecond = 0.0000133334
	priceLambdaRequest  = 0.20 / 1e6
	// EventBridge: $1.00 per million custom events put on a bus (the forwarder's
	// Pending Pods batches); AWS service events (EC2 state changes, spot warnings,
	// AWS Health) on the default bus cost nothing.
	priceEventBridgeCustomEvent = 1.00 / 1e6
	// EventBridge Scheduler: $1.00 per million invocations (after 14 million free a month,
	// which a single cluster never passes; not counted here).
	priceSchedulerInvocation = 1.00 / 1e6
	// SQS standard: $0.40 per million requests. Joiner's queues are dead-letter queues:
	// a healthy control plane sends them nothing.
	priceSQSRequest = 0.40 / 1e6
	// CloudWatch Logs: $0.50 per GB ingested, $0.03 per GB-month stored.
	priceLogsIngestGB  = 0.50
	priceLogsStoreGBMo = 0.03
	// CloudWatch: $0.30 per custom metric-month (first 10,000; EMF metrics count as
	// custom, each name × dimension set), $0.10 per standard alarm-month.
	priceMetricMonth = 0.30
	priceAlarmMonth  = 0.10
	hoursPerMonth    = 730 // AWS's pricing month
)

// The deployed stack (infra/stack.go; TestBillMatchesStack checks them): the
// functions' memory, the log groups' retention, and the alarms: a depth alarm per
// dead-letter queue (the delivery DLQ and one per function), none on function
// errors, since a failed invocation ends in its function's DLQ. The functions'
// figures are fields of a JSON log line (no EMF, so no custom metric), charted by
// the dashboard with Logs Insights. Not priced: the dashboard (CloudWatch's free
// tier holds 3 per account; $3.00 a month beyond) and Logs Insights scans while
// it is viewed ($0.005 per GB scanned).
var (
	stackMemoryMB = map[string]int{"provisioner": 1024, "interruption": 512, "consolidator": 1024}
	stackLogDays  = 30
	stackAlarms   = 1 + 3
)

// Bill is what the control plane itself costs at the replay's rate, per month.
type Bill struct {
	// Functions are per function: invocations a month, GB-seconds a month, and the
	// billed milliseconds measured (handler wall time plus simulated waits).
	Functions map[string]FunctionBill `json:"functions"`
	// Dollars a month per service.
	Lambda      float64 `json:"lambda"`
	EventBridge float64 `json:"eventBridge"`
	Scheduler   float64 `json:"scheduler"`
	SQS         float64 `json:"sqs"`
	Logs        float64 `json:"logs"`
	Metrics     float64 `json:"metrics"`
	Alarms      float64 `json:"alarms"`
	Total       float64 `json:"total"`
	// CustomMetrics is the distinct EMF metrics (name × function) the functions
	// emitted: none since their figures are plain log fields; counted so a return
	// of EMF shows on the bill.
	CustomMetrics int `json:"customMetrics"`
	// LogGBPerMonth is what the functions log (their JSON lines, the metrics line included).
	LogGBPerMonth float64 `json:"logGBPerMonth"`
	// NodesPerMonth is the nodes' cost at the replay's rate, for comparison.
	NodesPerMonth float64 `json:"nodesPerMonth"`
}

// FunctionBill is one function's share.
type FunctionBill struct {
	Invocations     float64 `json:"invocationsPerMonth"`
	GBSeconds       float64 `json:"gbSecondsPerMonth"`
	MeanMillis      float64 `json:"meanBilledMillis"`
	MemoryMB        int     `json:"memoryMB"`
	DollarsPerMonth float64 `json:"dollarsPerMonth"`
}

// meter gathers, during a replay, what the bill needs.
type meter struct {
	mu         sync.Mutex
	billedMs   map[string]int64
	calls      map[string]int
	customEvts int
	schedTicks int
	logBytes   int64
	metrics    map[string]bool
}

func newMeter() *meter {
	return &meter{billedMs: map[string]int64{}, calls: map[string]int{}, metrics: map[string]bool{}}
}

// invoked records one invocation: Lambda bills each rounded up to the millisecond.
func (m *meter) invoked(fn, why string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[fn]++
	m.billedMs[fn] += (d + time.Millisecond - 1).Milliseconds()
	switch why {
	case "forwarder":
		m.customEvts++
	case "schedule":
		m.schedTicks++
	}
}

// logWriter counts the functions' log bytes (CloudWatch Logs ingests them).
type logWriter struct{ m *meter }

func (w logWriter) Write(p []byte) (int, error) {
	w.m.mu.Lock()
	w.m.logBytes += int64(len(p))
	w.m.mu.Unlock()
	return len(p), nil
}

// metricsWriter counts the metrics lines as log bytes, and the distinct custom
// metrics any EMF line among them would define.
type metricsWriter struct{ m *meter }

func (w metricsWriter) Write(p []byte) (int, error) {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.logBytes += int64(len(p))
	for _, line := range bytes.Split(p, []byte("\n")) {
		var emf struct {
			Function string `json:"Function"`
			AWS      struct {
				CloudWatchMetrics []struct {
					Metrics []struct{ Name string } `json:"Metrics"`
				} `json:"CloudWatchMetrics"`
			} `json:"_aws"`
		}
		if json.Unmarshal(line, &emf) != nil {
			continue
		}
		for _, d := range emf.AWS.CloudWatchMetrics {
			for _, mt := range d.Metrics {
				w.m.metrics[emf.Function+"/"+mt.Name] = true
			}
		}
	}
	return len(p), nil
}

// bill prices what was metered over simulated, with the nodes' cost for comparison.
func (m *meter) bill(simulated time.Duration, nodeCost float64) *Bill {
	m.mu.Lock()
	defer m.mu.Unlock()
	if simulated <= 0 {
		return nil
	}
	perMonth := hoursPerMonth * float64(time.Hour) / float64(simulated)
	b := &Bill{Functions: map[string]FunctionBill{}, CustomMetrics: len(m.metrics), NodesPerMonth: nodeCost * perMonth}
	calls := 0
	for fn, n := range m.calls {
		mem := stackMemoryMB[fn]
		gbs := float64(m.billedMs[fn]) / 1000 * float64(mem) / 1024 * perMonth
		fb := FunctionBill{Invocations: float64(n) * perMonth, GBSeconds: gbs, MeanMillis: float64(m.billedMs[fn]) / float64(n), MemoryMB: mem}
		fb.DollarsPerMonth = gbs*priceLambdaGBSecond + fb.Invocations*priceLambdaRequest
		b.Functions[fn] = fb
		b.Lambda += fb.DollarsPerMonth
		calls += n
	}
	b.EventBridge = float64(m.customEvts) * perMonth * priceEventBridgeCustomEvent
	b.Scheduler = float64(m.schedTicks) * perMonth * priceSchedulerInvocation
	b.SQS = 0 // dead-letter queues only: nothing is sent while deliveries succeed
	b.LogGBPerMonth = float64(m.logBytes) * perMonth / (1 << 30)
	b.Logs = b.LogGBPerMonth*priceLogsIngestGB + b.LogGBPerMonth*float64(stackLogDays)/30*priceLogsStoreGBMo
	b.Metrics = float64(len(m.metrics)) * priceMetricMonth
	b.Alarms = float64(stackAlarms) * priceAlarmMonth
	b.Total = b.Lambda + b.EventBridge + b.Scheduler + b.SQS + b.Logs + b.Metrics + b.Alarms
	_ = priceSQSRequest // priced at zero requests; kept for the README's arithmetic
	return b
}

// billLines are the summary rows of the control plane's bill.
func billLines(b *Bill) (string, string) {
	if b == nil {
		return "n/a", "n/a"
	}
	names := make([]string, 0, len(b.Functions))
	for n := range b.Functions {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		f := b.Functions[n]
		parts = append(parts, fmt.Sprintf("%s %.0f/mo × %.0f ms × %d MB = %.0f GB-s", n, f.Invocations, f.MeanMillis, f.MemoryMB, f.GBSeconds))
	}
	usage := strings.Join(parts, "; ")
	cost := fmt.Sprintf("$%.2f/month (Lambda $%.2f, EventBridge $%.2f, Scheduler $%.2f, SQS $%.2f, Logs $%.2f for %.3f GB, "+
		"Metrics $%.2f for %d, Alarms $%.2f) vs nodes $%.2f/month", b.Total, b.Lambda, b.EventBridge, b.Scheduler, b.SQS, b.Logs,
		b.LogGBPerMonth, b.Metrics, b.CustomMetrics, b.Alarms, b.NodesPerMonth)
	return usage, cost
}
