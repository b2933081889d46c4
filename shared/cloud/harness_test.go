package cloud

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

// The suite drives the real aws-sdk-go-v2 clients over HTTP against
// moto_server (an independent AWS emulator) through faultProxy, which injects
// the faults moto cannot produce (throttling, ICE, partial fleets, denied
// permissions) on the wire, so the SDK's decoding and retrying are exercised.

func TestMain(m *testing.M) {
	code := m.Run()
	mototest.StopShared()
	os.Exit(code)
}

// motoURL is the package's one moto_server, started on first use.
func motoURL(t testing.TB) string { return mototest.Shared(t) }

// faultProxy forwards to a backend, recording every call and injecting faults.
type faultProxy struct {
	backend string
	srv     *httptest.Server
	client  *http.Client

	mu sync.Mutex
	// calls records the action of every request, in order.
	calls []string
	// forms records the form of every EC2 request by action.
	forms map[string][]url.Values
	// jsonBodies records the body of every JSON-protocol request by action.
	jsonBodies map[string][]string
	// throttle answers RequestLimitExceeded (503) to the next n calls of an action.
	throttle map[string]int
	// ice lists unfulfillable offerings: instanceType/zone/capacityType.
	ice map[string]bool
	// iceCode is like ice with the error code to answer (e.g.
	// InsufficientFreeAddressesInSubnet).
	iceCode map[string]string
	// extraInstances makes the next CreateFleet launch this many more instances.
	extraInstances int
	// extraErrors are CreateFleet errors appended to the next successful fleet.
	extraErrors []fleetErr
	// deny answers UnauthorizedOperation to calls of these actions, DryRun or
	// not, as IAM does.
	deny map[string]bool
	// ltExistsRace makes the next CreateLaunchTemplate create the template and
	// then answer AlreadyExists, as when another invocation won the race.
	ltExistsRace bool
	// fleets summarises every CreateFleet answer that carried a result.
	fleets []fleetOutcome
	// reported holds every offering a CreateFleet answer reported as
	// unfulfillable; retried counts later requests that still asked for one.
	reported map[string]bool
	retried  []string
}

// fleetOutcome is what one CreateFleet answered.
type fleetOutcome struct {
	instances int
	errors    int
}

type fleetErr struct{ code, itype, zone, subnet, ct string }

func newFaultProxy(t testing.TB, backend string) *faultProxy {
	p := &faultProxy{backend: backend, forms: map[string][]url.Values{}, jsonBodies: map[string][]string{}, reported: map[string]bool{}, throttle: map[string]int{}, ice: map[string]bool{}, deny: map[string]bool{}}
	p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.srv.Close()
		p.client.CloseIdleConnections()
	})
	return p
}

func (p *faultProxy) URL() string { return p.srv.URL }

func (p *faultProxy) count(action string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c == action {
			n++
		}
	}
	return n
}

func (p *faultProxy) formsOf(action string) []url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.forms[action])
}

func (p *faultProxy) lastJSON(action string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.jsonBodies[action]
	if len(b) == 0 {
		return ""
	}
	return b[len(b)-1]
}

func (p *faultProxy) setICE(itype, zone, ct string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ice[itype+"/"+zone+"/"+ct] = true
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	action := ""
	var form url.Values
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		action = target[strings.LastIndex(target, ".")+1:]
	} else if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/clusters/") {
		action = "DescribeCluster" // EKS is REST: the action is in the route
	} else if f, err := url.ParseQuery(string(body)); err == nil {
		form = f
		action = f.Get("Action")
	}
	p.mu.Lock()
	p.calls = append(p.calls, action)
	if form != nil {
		p.forms[action] = append(p.forms[action], form)
	} else {
		p.jsonBodies[action] = append(p.jsonBodies[action], string(body))
	}
	if p.throttle[action] > 0 {
		p.throttle[action]--
		p.mu.Unlock()
		writeEC2Error(w, http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
		return
	}
	if form != nil && p.deny[action] {
		p.mu.Unlock()
		writeEC2Error(w, http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation.")
		return
	}
	race := false
	if action == "CreateLaunchTemplate" && p.ltExistsRace && form.Get("DryRun") != "true" {
		p.ltExistsRace, race = false, true
	}
	p.mu.Unlock()

	if action == "CreateFleet" && form.Get("DryRun") != "true" {
		p.createFleet(w, r, form)
		return
	}
	status, hdr, resp := p.forward(r, body)
	if race && status == http.StatusOK {
		writeEC2Error(w, http.StatusBadRequest, "InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
		return
	}
	copyHeader(w, hdr)
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

func (p *faultProxy) forward(r *http.Request, body []byte) (int, http.Header, []byte) {
	req, _ := http.NewRequest(r.Method, p.backend+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.ContentLength = int64(len(body))
	resp, err := p.client.Do(req)
	if err != nil {
		return http.StatusBadGateway, http.Header{}, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return http.StatusBadGateway, http.Header{}, []byte(err.Error())
	}
	return resp.StatusCode, resp.Header, b
}

func copyHeader(w http.ResponseWriter, h http.Header) {
	for k, v := range h {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		w.Header()[k] = v
	}
}

func writeEC2Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>proxy-%d</RequestID></Response>`, code, msg, time.Now().UnixNano())
}

var overrideKey = regexp.MustCompile(`^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$`)

// createFleet applies ICE, partial-fulfilment and extra-error faults: ICE'd
// overrides are removed before the request reaches the backend and reported
// in the answer's errorSet, as EC2 reports the pools it could not fill.
func (p *faultProxy) createFleet(w http.ResponseWriter, r *http.Request, form url.Values) {
	ct := form.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	p.mu.Lock()
	for k, v := range form {
		if m := overrideKey.FindStringSubmatch(k); m != nil && m[3] == "InstanceType" {
			zone := form.Get(strings.TrimSuffix(k, "InstanceType") + "AvailabilityZone")
			if key := v[0] + "/" + zone + "/" + ct; p.reported[key] {
				p.retried = append(p.retried, key)
			}
		}
	}
	p.mu.Unlock()
	type override struct {
		cfg    int
		fields map[string]string
	}
	byKey := map[[2]int]*override{}
	for k, v := range form {
		m := overrideKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		c, _ := strconv.Atoi(m[1])
		o, _ := strconv.Atoi(m[2])
		key := [2]int{c, o}
		if byKey[key] == nil {
			byKey[key] = &override{cfg: c, fields: map[string]string{}}
		}
		byKey[key].fields[m[3]] = v[0]
		delete(form, k)
	}
	keys := make([][2]int, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	p.mu.Lock()
	var iced []fleetErr
	next := map[int]int{}
	for _, k := range keys {
		o := byKey[k]
		f := o.fields
		key := f["InstanceType"] + "/" + f["AvailabilityZone"] + "/" + ct
		if code := p.iceCode[key]; code != "" || p.ice[key] {
			if code == "" {
				code = "InsufficientInstanceCapacity"
			}
			iced = append(iced, fleetErr{code, f["InstanceType"], f["AvailabilityZone"], f["SubnetId"], ct})
			continue
		}
		next[o.cfg]++
		for field, v := range f {
			form.Set(fmt.Sprintf("LaunchTemplateConfigs.%d.Overrides.%d.%s", o.cfg, next[o.cfg], field), v)
		}
	}
	extra := p.extraInstances
	p.extraInstances = 0
	extraErrs := p.extraErrors
	p.extraErrors = nil
	p.mu.Unlock()

	if len(next) == 0 {
		// Every pool is short: no instance, only errors.
		body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>proxy</requestId><fleetId>fleet-proxy-%d</fleetId><fleetInstanceSet/>%s</CreateFleetResponse>`, time.Now().UnixNano(), errorSet(iced))
		p.noteFleet([]byte(body))
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, body)
		return
	}
	// Drop configs left without overrides.
	for k := range form {
		if strings.HasPrefix(k, "LaunchTemplateConfigs.") && !strings.Contains(k, ".Overrides.") {
			c, _ := strconv.Atoi(strings.Split(k, ".")[1])
			if next[c] == 0 {
				delete(form, k)
			}
		}
	}
	if extra > 0 {
		form.Set("TargetCapacitySpecification.TotalTargetCapacity", strconv.Itoa(1+extra))
	}
	body := []byte(form.Encode())
	status, hdr, resp := p.forward(r, body)
	if status == http.StatusOK && len(iced)+len(extraErrs) > 0 {
		resp = bytes.Replace(resp, []byte("</CreateFleetResponse>"), []byte(errorSet(append(iced, extraErrs...))+"</CreateFleetResponse>"), 1)
	}
	if status == http.StatusOK {
		p.noteFleet(resp)
	}
	copyHeader(w, hdr)
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

// noteFleet records what a CreateFleet answer launched and which offerings it
// reported as unfulfillable.
func (p *faultProxy) noteFleet(body []byte) {
	var doc struct {
		Instances []struct {
			IDs []string `xml:"instanceIds>item"`
		} `xml:"fleetInstanceSet>item"`
		Errors []struct {
			Code      string `xml:"errorCode"`
			Lifecycle string `xml:"lifecycle"`
			Type      string `xml:"launchTemplateAndOverrides>overrides>instanceType"`
			Zone      string `xml:"launchTemplateAndOverrides>overrides>availabilityZone"`
		} `xml:"errorSet>item"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		return
	}
	o := fleetOutcome{errors: len(doc.Errors)}
	for _, i := range doc.Instances {
		o.instances += len(i.IDs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fleets = append(p.fleets, o)
	for _, e := range doc.Errors {
		if IsUnfulfillableCapacity(e.Code) {
			p.reported[e.Type+"/"+e.Zone+"/"+e.Lifecycle] = true
		}
	}
}

func errorSet(errs []fleetErr) string {
	var b strings.Builder
	b.WriteString("<errorSet>")
	for _, e := range errs {
		fmt.Fprintf(&b, `<item><launchTemplateAndOverrides><overrides><instanceType>%s</instanceType><subnetId>%s</subnetId><availabilityZone>%s</availabilityZone></overrides></launchTemplateAndOverrides><lifecycle>%s</lifecycle><errorCode>%s</errorCode><errorMessage>There is no %s capacity for %s in %s.</errorMessage></item>`,
			e.itype, e.subnet, e.zone, e.ct, e.code, e.ct, e.itype, e.zone)
	}
	b.WriteString("</errorSet>")
	return b.String()
}

// ---- environment ----

const (
	testCluster   = "joiner-test"
	testRole      = "KarpenterNodeRole-joiner-test"
	testRegion    = "us-east-1"
	testK8s       = "1.30"
	testParamRoot = "/joiner-test/aws/service"
	testEndpoint  = "https://api.joiner-test.example:6443"
	testCIDR      = "10.100.0.0/16"
	testToken     = "abcdef.0123456789abcdef"
)

var testCA = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nTESTDATA\n-----END CERTIFICATE-----\n"))

// env is a freshly reset backend seeded with a VPC, subnets, security groups,
// AMI parameters and a bootstrap token.
type env struct {
	t testing.TB
	// kind is "moto" or "awssim".
	kind      string
	sim       *awssim.Sim
	paramRoot string
	proxy     *faultProxy
	cfg       aws.Config // through the proxy (what the provider uses)
	direct    aws.Config // straight to the backend (seeding and checks)
	ec2       *ec2.Client
	subnets   map[string]string // zone → subnet id (tagged for discovery)
	other     string            // an untagged subnet in us-east-1d
	sgNodes   string
	sgNamed   string
	amiX86    string
	amiARM    string
	amiGPU    string
	clock     *fakeClock
	cache     *UnavailableOfferings
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func awsConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(endpoint),
		// A transport of its own: connections never leak between tests whose
		// servers reuse a port. The timeout is long because moto answers
		// DescribeInstanceTypes slowly on a loaded machine.
		HTTPClient: &http.Client{Timeout: 3 * time.Minute, Transport: http.DefaultTransport.(*http.Transport).Clone()},
	}
}

// backends lists the servers the suite runs against.
var backends = []string{"moto", "awssim"}

// forEachBackend runs a test against moto_server and against awssim, each
// freshly seeded.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) { fn(t, newEnvFor(t, kind)) })
	}
}

func newEnvFor(t testing.TB, kind string) *env {
	t.Helper()
	e := &env{t: t, kind: kind, subnets: map[string]string{}}
	e.clock = &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e.cache = NewUnavailableOfferings(e.clock.Now)
	var base string
	switch kind {
	case "moto":
		base = motoURL(t)
		resp, err := http.Post(base+"/moto-api/reset", "application/json", nil)
		if err != nil {
			t.Fatalf("resetting moto: %v", err)
		}
		resp.Body.Close()
		// moto refuses parameters under the reserved /aws prefix.
		e.paramRoot = testParamRoot
	case "awssim":
		sim, err := awssim.Start(context.Background(), awssim.Config{Seed: &awssim.Seed{NoPublicParameters: true}, Clock: e.clock, RandSeed: 7})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sim.Close() })
		e.sim = sim
		base = sim.Endpoint()
		e.paramRoot = "/aws/service"
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	e.proxy = newFaultProxy(t, base)
	e.cfg = awsConfig(e.proxy.URL())
	e.direct = awsConfig(base)
	t.Cleanup(func() {
		e.cfg.HTTPClient.(*http.Client).CloseIdleConnections()
		e.direct.HTTPClient.(*http.Client).CloseIdleConnections()
	})
	e.ec2 = ec2.NewFromConfig(e.direct)
	if e.sim != nil {
		e.seedSim()
	} else {
		e.seed()
	}
	return e
}

// seedSim gives awssim the same world seed() builds in moto.
func (e *env) seedSim() {
	disc := map[string]string{"karpenter.sh/discovery": testCluster, "kubernetes.io/role/internal-elb": "1"}
	seed := awssim.Seed{NoPublicParameters: true}
	for i, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"} {
		id := fmt.Sprintf("subnet-0%d00000000000000%d", i+1, i+1)
		tags := disc
		if zone == "us-east-1d" {
			e.other, tags = id, map[string]string{"Name": "unselected"}
		} else {
			e.subnets[zone] = id
		}
		seed.Subnets = append(seed.Subnets, awssim.Subnet{ID: id, VpcID: "vpc-0joiner0000000001", Zone: zone, CIDR: fmt.Sprintf("10.0.%d.0/24", i+1), Tags: tags})
	}
	e.sgNodes, e.sgNamed = "sg-0000000000000000a", "sg-0000000000000000b"
	seed.SecurityGroups = []awssim.SecurityGroup{
		{ID: e.sgNodes, Name: "joiner-nodes", Description: "nodes", VpcID: "vpc-0joiner0000000001", Tags: map[string]string{"karpenter.sh/discovery": testCluster}},
		{ID: e.sgNamed, Name: "joiner-named", Description: "by name", VpcID: "vpc-0joiner0000000001"},
	}
	e.amiX86, e.amiARM, e.amiGPU = "ami-0000000000000a001", "ami-0000000000000a002", "ami-0000000000000a003"
	worker := map[string]string{"joiner-test/role": "worker"}
	// One small root snapshot: the same images stand for every family here, and
	// Bottlerocket's 4 GiB root must not be smaller than it.
	root := []awssim.ImageBlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 2}}
	seed.Images = []awssim.Image{
		{ID: e.amiX86, Name: "al2023-ami-2023.9.20261101.0-kernel-6.1-x86_64", Architecture: "x86_64", OwnerID: "137112412989", OwnerAlias: "amazon", Public: true, CreationDate: "2026-11-01T00:00:00Z", Tags: worker, BlockDevices: root},
		{ID: e.amiARM, Name: "al2023-ami-2023.9.20261101.0-kernel-6.1-arm64", Architecture: "arm64", OwnerID: "137112412989", OwnerAlias: "amazon", Public: true, CreationDate: "2026-11-01T00:00:00Z", Tags: worker, BlockDevices: root},
		{ID: e.amiGPU, Name: "amzn2-ami-hvm-2.0.20261001.0-x86_64-gp2", Architecture: "x86_64", OwnerID: "137112412989", OwnerAlias: "amazon", Public: true, CreationDate: "2026-10-01T00:00:00Z", BlockDevices: root},
		{ID: "ami-0000000000000a004", Name: "al2023-ami-2023.8.20260901.0-kernel-6.1-x86_64", Architecture: "x86_64", OwnerID: "137112412989", OwnerAlias: "amazon", Public: true, CreationDate: "2026-09-01T00:00:00Z", BlockDevices: root},
	}
	// The node role exists in the account (the user's prerequisite); Joiner
	// makes the instance profile that holds it.
	seed.Roles = []awssim.Role{{Name: testRole}}
	for name, value := range e.amiParameters() {
		seed.Parameters = append(seed.Parameters, awssim.Parameter{Name: name, Value: value})
	}
	seed.Parameters = append(seed.Parameters, awssim.Parameter{Name: "/kubean/bootstrap-token", Value: testToken, Type: "SecureString"})
	seed.Clusters = []awssim.Cluster{{Name: testCluster, Version: testK8s, Endpoint: testEndpoint, CertificateAuthority: testCA, ServiceIPv4CIDR: testCIDR}}
	e.must(e.sim.Apply(seed))
}

// amiParameters are the public AMI parameters both backends carry.
func (e *env) amiParameters() map[string]string {
	r, k := e.paramRoot, testK8s
	return map[string]string{
		fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/image_id", r, k):                                            e.amiX86,
		fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/arm64/standard/recommended/image_id", r, k):                                             e.amiARM,
		fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/x86_64/nvidia/recommended/image_id", r, k):                                              e.amiGPU,
		fmt.Sprintf("%s/bottlerocket/aws-k8s-%s/x86_64/latest/image_id", r, k):                                                                         e.amiX86,
		fmt.Sprintf("%s/bottlerocket/aws-k8s-%s/arm64/latest/image_id", r, k):                                                                          e.amiARM,
		fmt.Sprintf("%s/bottlerocket/aws-k8s-%s-nvidia/x86_64/latest/image_id", r, k):                                                                  e.amiGPU,
		fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2/recommended/image_id", r, k):                                                               e.amiX86,
		fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-%s-v20240807/image_id", r, k, k): e.amiGPU,
	}
}

// ---- faults: awssim's own where it has them, the proxy's otherwise ----

func (e *env) setICE(itype, zone, ct string) {
	if e.sim != nil {
		e.sim.SetICE(awssim.Offering{InstanceType: itype, Zone: zone, CapacityType: ct}, true)
		return
	}
	e.proxy.setICE(itype, zone, ct)
}

func (e *env) clearICE(offerings ...[3]string) {
	for _, o := range offerings {
		if e.sim != nil {
			e.sim.SetICE(awssim.Offering{InstanceType: o[0], Zone: o[1], CapacityType: o[2]}, false)
		}
	}
	e.proxy.mu.Lock()
	clear(e.proxy.ice)
	e.proxy.mu.Unlock()
}

func (e *env) throttle(action string, n int) {
	if e.sim != nil {
		e.sim.Throttle(action, n)
		return
	}
	e.proxy.mu.Lock()
	e.proxy.throttle[action] = n
	e.proxy.mu.Unlock()
}

func (e *env) deny(action string) {
	if e.sim != nil {
		e.sim.Deny("ec2:" + action)
		return
	}
	e.proxy.mu.Lock()
	e.proxy.deny[action] = true
	e.proxy.mu.Unlock()
}

func (e *env) allow(action string) {
	if e.sim != nil {
		e.sim.Allow("ec2:" + action)
		return
	}
	e.proxy.mu.Lock()
	delete(e.proxy.deny, action)
	e.proxy.mu.Unlock()
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) seed() {
	ctx := context.Background()
	vpc, err := e.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	e.must(err)
	vpcID := aws.ToString(vpc.Vpc.VpcId)
	for i, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"} {
		out, err := e.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: aws.String(vpcID), CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i+1)), AvailabilityZone: aws.String(zone)})
		e.must(err)
		id := aws.ToString(out.Subnet.SubnetId)
		if zone == "us-east-1d" {
			e.other = id
			e.tag(id, map[string]string{"Name": "unselected"})
			continue
		}
		e.subnets[zone] = id
		e.tag(id, map[string]string{"karpenter.sh/discovery": testCluster, "kubernetes.io/role/internal-elb": "1"})
	}
	sg, err := e.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("joiner-nodes"), Description: aws.String("nodes"), VpcId: aws.String(vpcID)})
	e.must(err)
	e.sgNodes = aws.ToString(sg.GroupId)
	e.tag(e.sgNodes, map[string]string{"karpenter.sh/discovery": testCluster})
	sg2, err := e.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("joiner-named"), Description: aws.String("by name"), VpcId: aws.String(vpcID)})
	e.must(err)
	e.sgNamed = aws.ToString(sg2.GroupId)

	// moto ships real Amazon images; use two of them as "worker" AMIs.
	e.amiX86 = e.findImage("al2023-ami-2023*-x86_64")
	e.amiARM = e.findImage("al2023-ami-2023*-arm64")
	e.amiGPU = e.findImage("amzn2-ami-hvm-2.0*-x86_64-gp2")
	e.tag(e.amiX86, map[string]string{"joiner-test/role": "worker"})
	e.tag(e.amiARM, map[string]string{"joiner-test/role": "worker"})

	s := ssm.NewFromConfig(e.direct)
	put := func(name, value string, typ ssmtypes.ParameterType) {
		_, err := s.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: typ, Overwrite: aws.Bool(true)})
		e.must(err)
	}
	for name, value := range e.amiParameters() {
		put(name, value, ssmtypes.ParameterTypeString)
	}
	put("/kubean/bootstrap-token", testToken, ssmtypes.ParameterTypeSecureString)
	_, err = iam.NewFromConfig(e.direct).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(testRole),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	e.must(err)
	sm := secretsmanager.NewFromConfig(e.direct)
	_, err = sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("kubean/bootstrap-token"), SecretString: aws.String(testToken)})
	e.must(err)
}

func (e *env) findImage(pattern string) string {
	out, err := e.ec2.DescribeImages(context.Background(), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{pattern}}}})
	e.must(err)
	if len(out.Images) == 0 {
		e.t.Fatalf("moto has no image named %s", pattern)
	}
	sort.Slice(out.Images, func(i, j int) bool { return aws.ToString(out.Images[i].ImageId) < aws.ToString(out.Images[j].ImageId) })
	return aws.ToString(out.Images[0].ImageId)
}

func (e *env) tag(id string, tags map[string]string) {
	_, err := e.ec2.CreateTags(context.Background(), &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(tags)})
	e.must(err)
}

// config is the provider configuration for the seeded cluster.
func (e *env) config() Config {
	return Config{
		ClusterName: testCluster, Region: testRegion, ClusterEndpoint: testEndpoint, ClusterCABundle: testCA,
		ClusterCIDR: testCIDR, KubernetesVersion: testK8s, PublicParameterRoot: e.paramRoot,
		Clock: e.clock.Now, Unavailable: e.cache,
		CACertHash: "sha256:" + strings.Repeat("0123456789abcdef", 4),
	}
}

// provider is a new invocation's provider, with a fast bounded retryer.
func (e *env) provider(mod ...func(*Config)) *Provider {
	e.t.Helper()
	cfg := e.config()
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, m := range mod {
		m(&cfg)
	}
	clients := NewClients(e.cfg, RetryOptions{MaxAttempts: 4, MaxBackoff: 20 * time.Millisecond}, false)
	p, err := New(cfg, clients)
	e.must(err)
	return p
}

// instance reads one instance straight from the backend.
func (e *env) instance(id string) ec2types.Instance {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	e.must(err)
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			return i
		}
	}
	e.t.Fatalf("instance %s not found", id)
	return ec2types.Instance{}
}

// runningInstances lists non-terminated instances straight from the backend.
func (e *env) runningInstances() []ec2types.Instance {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}},
	})
	e.must(err)
	var all []ec2types.Instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all
}

type ec2DescribeImagesByID struct{ id string }

func (d ec2DescribeImagesByID) input() ec2.DescribeImagesInput {
	return ec2.DescribeImagesInput{ImageIds: []string{d.id}}
}

// simTemplateData reads a launch template's data from awssim's state, in the
// shape DescribeLaunchTemplateVersions answers.
func simTemplateData(t testing.TB, sim *awssim.Sim, name string) ec2types.ResponseLaunchTemplateData {
	t.Helper()
	for _, lt := range sim.State().LaunchTemplates {
		if lt.Name != name {
			continue
		}
		d := lt.Data
		out := ec2types.ResponseLaunchTemplateData{
			ImageId: aws.String(d.ImageID), UserData: aws.String(d.UserData), SecurityGroupIds: d.SecurityGroupIDs,
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecification{Name: aws.String(d.IAMInstanceProfile)},
		}
		if d.CapacityReservationID != "" {
			out.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationResponse{
				CapacityReservationTarget: &ec2types.CapacityReservationTargetResponse{CapacityReservationId: aws.String(d.CapacityReservationID)},
			}
		}
		if m := d.MetadataOptions; m != nil {
			out.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptions{
				HttpTokens: ec2types.LaunchTemplateHttpTokensState(m.HTTPTokens), HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointState(m.HTTPEndpoint),
				HttpPutResponseHopLimit: aws.Int32(int32(m.HTTPPutResponseHopLimit)),
			}
		}
		for _, b := range d.BlockDeviceMappings {
			out.BlockDeviceMappings = append(out.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMapping{
				DeviceName: aws.String(b.DeviceName),
				Ebs: &ec2types.LaunchTemplateEbsBlockDevice{VolumeSize: aws.Int32(int32(b.VolumeSizeGiB)), VolumeType: ec2types.VolumeType(b.VolumeType),
					Encrypted: b.Encrypted, DeleteOnTermination: b.DeleteOnTermination},
			})
		}
		return out
	}
	t.Fatalf("awssim has no launch template %s", name)
	return ec2types.ResponseLaunchTemplateData{}
}
