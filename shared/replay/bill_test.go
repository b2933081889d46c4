package replay

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBillMatchesStack: the bill prices the stack as infra/ deploys it (memory sizes,
// log retention, alarms), so a change there must change the bill too.
func TestBillMatchesStack(t *testing.T) {
	stack, err := os.ReadFile("../../infra/stack.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\{Name: "(\w+)",[^}]*?MemoryMB: (\d+),`).FindAllStringSubmatch(string(stack), -1) {
		want, _ := strconv.Atoi(m[2])
		if stackMemoryMB[m[1]] != want {
			t.Errorf("%s: the bill prices %d MB, infra/stack.go deploys %d MB", m[1], stackMemoryMB[m[1]], want)
		}
	}
	if n := len(regexp.MustCompile(`MemoryMB: \d+,`).FindAllString(string(stack), -1)); n != len(stackMemoryMB) {
		t.Errorf("infra/stack.go sizes %d functions, the bill %d", n, len(stackMemoryMB))
	}
	// One depth alarm per dead-letter queue (the delivery DLQ and one per
	// function), and no other alarm.
	if n := strings.Count(string(stack), "alarm("); !strings.Contains(string(stack), `alarm(id+"DepthAlarm"`) || n != 1 ||
		stackAlarms != len(stackMemoryMB)+1 {
		t.Errorf("alarms: the bill counts %d, infra/stack.go calls alarm() %d times; check them", stackAlarms, n)
	}
	cfg, err := os.ReadFile("../../infra/config.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "c.LogRetentionDays = "+strconv.Itoa(stackLogDays)) {
		t.Errorf("log retention: the bill assumes %d days, infra/config.go's default differs", stackLogDays)
	}
}

// TestBillArithmetic prices a known hour: 60 sweeps of 200 ms and 12 consolidations
// of 1.5 s at 1 GB, 30 Pending Pods batches, 1 MB of logs and 4 metrics.
func TestBillArithmetic(t *testing.T) {
	m := newMeter()
	for i := 0; i < 60; i++ {
		m.invoked("provisioner", "schedule", 200*time.Millisecond)
	}
	for i := 0; i < 30; i++ {
		m.invoked("provisioner", "forwarder", 200*time.Millisecond+time.Microsecond) // rounds up to 201 ms
	}
	for i := 0; i < 12; i++ {
		m.invoked("consolidator", "schedule", 1500*time.Millisecond)
	}
	_, _ = logWriter{m}.Write(make([]byte, 1<<20-200))
	emf := `{"Function":"provisioner","_aws":{"CloudWatchMetrics":[{"Metrics":[{"Name":"PodsPending"},{"Name":"NodesLaunched"}]}]}}` + "\n" +
		`{"Function":"consolidator","_aws":{"CloudWatchMetrics":[{"Metrics":[{"Name":"DecisionMillis"},{"Name":"NodesTerminated"}]}]}}`
	_, _ = metricsWriter{m}.Write([]byte(emf + "\n" + emf))
	b := m.bill(time.Hour, 0.5)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	p := b.Functions["provisioner"]
	near("provisioner invocations", p.Invocations, 90*730)
	near("provisioner GB-s", p.GBSeconds, (60*0.2+30*0.201)*730)
	near("consolidator GB-s", b.Functions["consolidator"].GBSeconds, 12*1.5*730)
	near("lambda", b.Lambda, ((60*0.2+30*0.201)+12*1.5)*730*priceLambdaGBSecond+102*730*priceLambdaRequest)
	near("eventbridge", b.EventBridge, 30*730*priceEventBridgeCustomEvent)
	near("scheduler", b.Scheduler, 72*730*priceSchedulerInvocation)
	if b.CustomMetrics != 4 {
		t.Errorf("custom metrics %d, want 4 (the same 4 emitted twice)", b.CustomMetrics)
	}
	logGB := float64(1<<20-200+2*len(emf)+1) * 730 / (1 << 30)
	near("log GB", b.LogGBPerMonth, logGB)
	near("logs", b.Logs, logGB*(priceLogsIngestGB+priceLogsStoreGBMo))
	near("nodes", b.NodesPerMonth, 0.5*730)
	near("total", b.Total, b.Lambda+b.EventBridge+b.Scheduler+b.Logs+4*priceMetricMonth+float64(stackAlarms)*priceAlarmMonth)
	if usage, cost := billLines(b); !strings.Contains(usage, "consolidator 8760/mo × 1500 ms × 1024 MB") || !strings.Contains(cost, "vs nodes $365.00/month") {
		t.Errorf("summary lines:\n%s\n%s", usage, cost)
	}
}
