package awssim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// fuzzSim is a fresh simulator per input: a fuzzed fault script must not slow the
// next input down.
func fuzzSim(t *testing.T) *Sim {
	t.Helper()
	seed := DefaultSeed("fuzz")
	s, err := New(Config{Catalog: fuzzCatalog, Clock: NewFakeClock(testEpoch), Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fuzzCatalog is the small test catalog, built once per fuzz target.
var fuzzCatalog *catalog.Catalog

func fuzzCatalogOnce(f *testing.F) { fuzzCatalog = testCatalog(f) }

// FuzzServeHTTP sends arbitrary requests to every service the simulator parses (EC2's
// query forms, SSM's and Secrets Manager's JSON, EKS's REST paths, the /_sim/
// control endpoints): none panics, each gets an HTTP status, and an error answer has
// the service's error shape, which the SDK's deserializers read.
func FuzzServeHTTP(f *testing.F) {
	fuzzCatalogOnce(f)
	f.Add(uint8(0), "DescribeInstances", []byte("InstanceId.1=i-0123456789abcdef0"))
	f.Add(uint8(0), "CreateFleet", []byte("Type=instant&TargetCapacitySpecification.TotalTargetCapacity=3&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=lt"))
	f.Add(uint8(0), "RunInstances", []byte("MinCount=1&MaxCount=99999999999&InstanceType=m6i.large&ImageId=ami-1"))
	f.Add(uint8(0), "CreateLaunchTemplate", []byte("LaunchTemplateName=x&LaunchTemplateData.UserData=%ZZ"))
	f.Add(uint8(1), "GetParameter", []byte(`{"Name":"/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"}`))
	f.Add(uint8(1), "PutParameter", []byte(`{"Name":5,"Value":null}`))
	f.Add(uint8(2), "GetSecretValue", []byte(`{"SecretId":["x"]}`))
	f.Add(uint8(3), "fuzz", []byte(""))
	f.Add(uint8(4), "faults", []byte(`{"faults":[{"kind":"latency","latency":"1h"}],"ice":{}}`))
	f.Add(uint8(4), "clock", []byte(`{"advance":"-5h"}`))
	f.Add(uint8(4), "state", []byte(`{"instances":[{"id":"i-1"}]}`))
	f.Add(uint8(5), "", []byte("{"))
	f.Fuzz(func(t *testing.T, kind uint8, action string, body []byte) {
		var r *http.Request
		ec2 := false
		switch kind % 6 {
		case 0:
			ec2 = true
			r = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(append([]byte("Action="+url.QueryEscape(action)+"&Version=2016-11-15&"), body...)))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		case 1:
			r = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header.Set("X-Amz-Target", "AmazonSSM."+action)
		case 2:
			r = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header.Set("X-Amz-Target", "secretsmanager."+action)
		case 3:
			method := http.MethodGet
			if len(body) > 0 {
				method = http.MethodPost
			}
			r = httptest.NewRequest(method, "/clusters/"+url.PathEscape(action), bytes.NewReader(body))
		case 4:
			method := http.MethodPost
			if len(body) == 0 {
				method = http.MethodGet
			}
			r = httptest.NewRequest(method, "/_sim/"+url.PathEscape(action), bytes.NewReader(body))
		default:
			r = httptest.NewRequest(http.MethodPost, "/"+url.PathEscape(action), bytes.NewReader(body))
		}
		w := httptest.NewRecorder()
		fuzzSim(t).ServeHTTP(w, r)
		status, out := w.Code, w.Body.String()
		if status < 200 || status > 599 {
			t.Fatalf("HTTP %d", status)
		}
		if status < 400 {
			return
		}
		switch {
		case ec2:
			if !strings.Contains(out, "<Response><Errors><Error><Code>") {
				t.Fatalf("EC2 error answer is not EC2's XML: %s", out)
			}
		case kind%6 == 4:
			var e struct{ Error string }
			if json.Unmarshal([]byte(out), &e) != nil || e.Error == "" {
				t.Fatalf("control error answer is not {\"error\": ...}: %s", out)
			}
		default:
			var e struct {
				Type string `json:"__type"`
			}
			if json.Unmarshal([]byte(out), &e) != nil || e.Type == "" {
				t.Fatalf("JSON service error answer has no __type: %s", out)
			}
		}
	})
}

// FuzzSeed: a state file (`joiner sim serve --state`, a scenario's aws.json) that
// decodes is applied or refused with an error, never a panic.
func FuzzSeed(f *testing.F) {
	fuzzCatalogOnce(f)
	if raw, err := os.ReadFile("testdata/seed-example.json"); err == nil {
		f.Add(raw)
	}
	def, _ := json.Marshal(DefaultSeed("fuzz"))
	f.Add(def)
	for _, s := range []string{`{}`, `{"instances":[{"id":"i-1","state":"running"}]}`, `{"subnets":[{"id":"subnet-1","cidrBlock":"10.0.0.0/99"}]}`,
		`{"capacity":[{"instanceType":"m6i.large","zone":"z","capacityType":"spot","count":-5}]}`, `{"region":""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var seed Seed
		if err := dec.Decode(&seed); err != nil {
			return
		}
		s, err := New(Config{Catalog: fuzzCatalog, Clock: NewFakeClock(testEpoch), Seed: &seed})
		if err != nil {
			return
		}
		_ = s.Apply(seed)
		_ = s.State()
	})
}
