package awssim

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// table is an insertion-ordered map, so listings are deterministic.
type table[T any] struct {
	m     map[string]*T
	order []string
}

func newTable[T any]() *table[T] { return &table[T]{m: map[string]*T{}} }

func (t *table[T]) get(id string) (*T, bool) { v, ok := t.m[id]; return v, ok }

func (t *table[T]) put(id string, v *T) {
	if _, ok := t.m[id]; !ok {
		t.order = append(t.order, id)
	}
	t.m[id] = v
}

func (t *table[T]) del(id string) {
	if _, ok := t.m[id]; !ok {
		return
	}
	delete(t.m, id)
	t.order = slices.DeleteFunc(t.order, func(s string) bool { return s == id })
}

func (t *table[T]) list() []*T {
	out := make([]*T, 0, len(t.order))
	for _, id := range t.order {
		out = append(out, t.m[id])
	}
	return out
}

// world is the mutable state of a simulator, guarded by Sim.mu.
type world struct {
	region, account string
	rng             *rand.Rand // IDs
	faultRNG        *rand.Rand // fault rates, kept apart so faults don't shift IDs
	// reqRNG draws request and event IDs, kept apart from rng so that how many
	// requests arrive (reads, SDK retries, a client's concurrent lookups) does not
	// shift the IDs of what the simulator creates.
	reqRNG *rand.Rand

	instances *table[Instance]
	subnets   *table[Subnet]
	sgs       *table[SecurityGroup]
	images    *table[Image]
	templates *table[LaunchTemplate]
	params    *table[Parameter]
	clusters  *table[Cluster]
	secrets   *table[Secret]
	roles     *table[Role]
	profiles  *table[InstanceProfile]
	// reservations are the capacity reservations, by ID.
	reservations *table[CapacityReservation]
	subnetNext   map[string]int // next host offset per subnet

	capacity   map[Offering]int
	ice        map[Offering]bool
	spotPrices map[[2]string]float64
	deny       map[string]bool // "service:action", lower case

	faults        []*Fault
	calls         []Call
	idempotent    map[string]idempotentResult // action + client token
	idemOrder     []string
	interruptions []Interruption
	events        []json.RawMessage
}

func newWorld(region, account string, rng *rand.Rand) *world {
	return &world{
		region:       region,
		account:      account,
		rng:          rng,
		faultRNG:     rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
		reqRNG:       rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
		instances:    newTable[Instance](),
		subnets:      newTable[Subnet](),
		sgs:          newTable[SecurityGroup](),
		images:       newTable[Image](),
		templates:    newTable[LaunchTemplate](),
		params:       newTable[Parameter](),
		clusters:     newTable[Cluster](),
		secrets:      newTable[Secret](),
		roles:        newTable[Role](),
		profiles:     newTable[InstanceProfile](),
		reservations: newTable[CapacityReservation](),
		subnetNext:   map[string]int{},
		capacity:     map[Offering]int{},
		ice:          map[Offering]bool{},
		spotPrices:   map[[2]string]float64{},
		deny:         map[string]bool{},
		idempotent:   map[string]idempotentResult{},
	}
}

// hexID returns prefix-<n hex digits>, as EC2 IDs look.
func (w *world) hexID(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('-')
	for b.Len() < len(prefix)+1+n {
		fmt.Fprintf(&b, "%016x", w.rng.Uint64())
	}
	return b.String()[:len(prefix)+1+n]
}

// uuid returns a random (deterministic per seed) UUID-shaped string.
func (w *world) uuid() string { return uuidFrom(w.rng) }

// requestID is a request's (or an emitted event's) UUID, from reqRNG.
func (w *world) requestID() string { return uuidFrom(w.reqRNG) }

func uuidFrom(r *rand.Rand) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], r.Uint64())
	binary.BigEndian.PutUint64(b[8:], r.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func normAction(a string) string {
	a = strings.TrimSpace(a)
	if !strings.Contains(a, ":") {
		a = "*:" + a
	}
	return strings.ToLower(a)
}

func (w *world) denied(service, action string) bool {
	return w.deny[strings.ToLower(service+":"+action)] || w.deny[strings.ToLower("*:"+action)] ||
		w.deny[strings.ToLower(service+":*")]
}

func (w *world) dropSpentFaults() {
	w.faults = slices.DeleteFunc(w.faults, func(f *Fault) bool { return f.Count > 0 && f.Hits >= f.Count })
}

// apply merges a seed into the state. The caller holds s.mu (or owns s).
func (s *Sim) apply(seed Seed) error {
	w := s.w
	now := s.clock.Now()
	if !seed.NoPublicParameters {
		versions := seed.KubernetesVersions
		if len(versions) == 0 {
			versions = DefaultKubernetesVersions
		}
		for _, pi := range publicAMIs(versions) {
			if _, ok := w.images.get(pi.image.ID); !ok {
				img := pi.image
				w.images.put(img.ID, &img)
			}
			for _, name := range pi.params {
				w.params.put(name, &Parameter{Name: name, Value: pi.image.ID, Type: "String", DataType: "aws:ec2:image", Version: 1, Modified: publicAMIDate})
			}
		}
	}
	for i := range seed.Subnets {
		sn := seed.Subnets[i]
		if !strings.HasPrefix(sn.ID, "subnet-") {
			return fmt.Errorf("awssim: seed subnet #%d: id %q must start with subnet-", i, sn.ID)
		}
		if sn.Zone == "" {
			return fmt.Errorf("awssim: seed subnet %s has no zone", sn.ID)
		}
		if sn.CIDR == "" {
			sn.CIDR = fmt.Sprintf("10.0.%d.0/24", w.subnets.len()+1)
		}
		p, err := netip.ParsePrefix(sn.CIDR)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("awssim: seed subnet %s: bad IPv4 CIDR %q", sn.ID, sn.CIDR)
		}
		if sn.AvailableIPs == 0 {
			sn.AvailableIPs = (1 << (32 - p.Bits())) - 5 // AWS reserves 5 addresses per subnet
		}
		if sn.VpcID == "" {
			sn.VpcID = DefaultVPCID
		}
		sn.Tags = cloneTags(sn.Tags)
		w.subnets.put(sn.ID, &sn)
	}
	for i := range seed.SecurityGroups {
		sg := seed.SecurityGroups[i]
		if !strings.HasPrefix(sg.ID, "sg-") {
			return fmt.Errorf("awssim: seed security group #%d: id %q must start with sg-", i, sg.ID)
		}
		if sg.Name == "" {
			sg.Name = sg.ID
		}
		if sg.VpcID == "" {
			sg.VpcID = DefaultVPCID
		}
		if sg.Description == "" {
			sg.Description = sg.Name
		}
		sg.Tags = cloneTags(sg.Tags)
		w.sgs.put(sg.ID, &sg)
	}
	for i := range seed.Images {
		img := seed.Images[i]
		if !strings.HasPrefix(img.ID, "ami-") {
			return fmt.Errorf("awssim: seed image #%d: id %q must start with ami-", i, img.ID)
		}
		if img.Architecture == "" {
			img.Architecture = "x86_64"
		}
		if img.Architecture != "x86_64" && img.Architecture != "arm64" {
			return fmt.Errorf("awssim: seed image %s: architecture %q is not x86_64 or arm64", img.ID, img.Architecture)
		}
		if img.OwnerID == "" {
			img.OwnerID = w.account
		}
		if img.State == "" {
			img.State = "available"
		}
		if img.CreationDate == "" {
			img.CreationDate = now.Format(time.RFC3339)
		}
		fillImageDevices(&img, 8)
		img.Tags = cloneTags(img.Tags)
		w.images.put(img.ID, &img)
	}
	for i := range seed.LaunchTemplates {
		lt := seed.LaunchTemplates[i]
		if !strings.HasPrefix(lt.ID, "lt-") || lt.Name == "" {
			return fmt.Errorf("awssim: seed launch template #%d needs an lt- id and a name", i)
		}
		if other, ok := s.templateByName(lt.Name); ok && other.ID != lt.ID {
			return fmt.Errorf("awssim: seed launch templates %s and %s are both named %q", other.ID, lt.ID, lt.Name)
		}
		if lt.CreateTime.IsZero() {
			lt.CreateTime = now
		}
		lt.Tags = cloneTags(lt.Tags)
		w.templates.put(lt.ID, &lt)
	}
	for i := range seed.Parameters {
		p := seed.Parameters[i]
		if p.Name == "" {
			return fmt.Errorf("awssim: seed parameter #%d has no name", i)
		}
		if p.Type == "" {
			p.Type = "String"
		}
		if p.DataType == "" {
			p.DataType = "text"
		}
		if p.Version == 0 {
			p.Version = 1
		}
		if p.Modified.IsZero() {
			p.Modified = now
		}
		w.params.put(p.Name, &p)
	}
	for i := range seed.Clusters {
		c := seed.Clusters[i]
		if c.Name == "" {
			return fmt.Errorf("awssim: seed cluster #%d has no name", i)
		}
		fillCluster(&c, w, now)
		w.clusters.put(c.Name, &c)
	}
	for i := range seed.Secrets {
		sec := seed.Secrets[i]
		if sec.Name == "" {
			return fmt.Errorf("awssim: seed secret #%d has no name", i)
		}
		s.fillSecret(&sec, now)
		w.secrets.put(sec.Name, &sec)
	}
	for i := range seed.Roles {
		r := seed.Roles[i]
		if err := s.fillRole(&r, now); err != nil {
			return fmt.Errorf("awssim: seed role #%d: %w", i, err)
		}
		w.roles.put(r.Name, &r)
	}
	for i := range seed.InstanceProfiles {
		ip := seed.InstanceProfiles[i]
		if err := s.fillProfile(&ip, now); err != nil {
			return fmt.Errorf("awssim: seed instance profile #%d: %w", i, err)
		}
		if len(ip.Roles) > 1 {
			return fmt.Errorf("awssim: seed instance profile %s holds %d roles; an instance profile holds at most one", ip.Name, len(ip.Roles))
		}
		for _, rn := range ip.Roles {
			if _, ok := w.roles.get(rn); !ok {
				return fmt.Errorf("awssim: seed instance profile %s: role %s is not seeded", ip.Name, rn)
			}
		}
		w.profiles.put(ip.Name, &ip)
	}
	for i := range seed.CapacityReservations {
		cr := seed.CapacityReservations[i]
		if err := s.fillReservation(&cr, now); err != nil {
			return fmt.Errorf("awssim: seed capacity reservation #%d: %w", i, err)
		}
		w.reservations.put(cr.ID, &cr)
	}
	for i := range seed.Instances {
		in := seed.Instances[i]
		if !strings.HasPrefix(in.ID, "i-") {
			return fmt.Errorf("awssim: seed instance #%d: id %q must start with i-", i, in.ID)
		}
		if _, ok := s.types[in.InstanceType]; !ok && len(s.types) > 0 {
			return fmt.Errorf("awssim: seed instance %s: instance type %q is not in the catalog", in.ID, in.InstanceType)
		}
		if in.CapacityType == "" {
			in.CapacityType = CapacityOnDemand
		}
		if in.State == "" {
			in.State = StateRunning
		}
		if in.LaunchTime.IsZero() {
			in.LaunchTime = now
		}
		if in.SubnetID != "" {
			sn, ok := w.subnets.get(in.SubnetID)
			if !ok {
				return fmt.Errorf("awssim: seed instance %s: subnet %s is not seeded", in.ID, in.SubnetID)
			}
			if in.Zone == "" {
				in.Zone = sn.Zone
			}
			in.VpcID = sn.VpcID
			if in.PrivateIP == "" {
				in.PrivateIP = w.nextIP(sn)
			}
		}
		if in.Zone == "" {
			return fmt.Errorf("awssim: seed instance %s needs a zone or a subnet", in.ID)
		}
		if in.PrivateIP != "" && in.PrivateDNSName == "" {
			in.PrivateDNSName = privateDNS(in.PrivateIP, w.region)
		}
		if in.Architecture == "" {
			in.Architecture = s.archOf(in.InstanceType)
		}
		switch in.State {
		case StatePending, StateShuttingDown:
			if in.NextTransition.IsZero() { // a seeded transitional state still ends
				d := s.cfg.BootTime
				if in.State == StateShuttingDown {
					d = s.cfg.ShutdownTime
				}
				in.NextTransition = now.Add(d)
			}
		case StateRunning:
		case StateTerminated:
			if in.TerminatedAt.IsZero() {
				in.TerminatedAt = now
			}
		default:
			return fmt.Errorf("awssim: seed instance %s: state %q is not pending, running, shutting-down or terminated", in.ID, in.State)
		}
		if in.CapacityType != CapacitySpot && in.CapacityType != CapacityOnDemand {
			return fmt.Errorf("awssim: seed instance %s: capacity type %q is not spot or on-demand", in.ID, in.CapacityType)
		}
		in.Tags = cloneTags(in.Tags)
		w.instances.put(in.ID, &in)
	}
	for _, c := range seed.Capacity {
		if c.Count < 0 {
			delete(w.capacity, c.Offering)
		} else {
			w.capacity[c.Offering] = c.Count
		}
	}
	for _, o := range seed.ICE {
		w.ice[o] = true
	}
	for _, p := range seed.SpotPrices {
		if p.Price <= 0 {
			return fmt.Errorf("awssim: seed spot price of %s in %s must be positive", p.InstanceType, p.Zone)
		}
		w.spotPrices[[2]string{p.InstanceType, p.Zone}] = p.Price
	}
	for _, a := range seed.Deny {
		w.deny[normAction(a)] = true
	}
	return nil
}

func (t *table[T]) len() int { return len(t.order) }

func cloneTags(m map[string]string) map[string]string {
	if len(m) == 0 {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// nextIP hands out the next private address of a subnet.
func (w *world) nextIP(sn *Subnet) string {
	p, err := netip.ParsePrefix(sn.CIDR)
	if err != nil {
		return ""
	}
	w.subnetNext[sn.ID]++
	off := w.subnetNext[sn.ID] + 3 // .0-.3 are AWS-reserved
	a := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) + uint32(off)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a).String()
}

func privateDNS(ip, region string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

func (s *Sim) archOf(instanceType string) string {
	if it, ok := s.types[instanceType]; ok && it.Arch == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

// advance applies every state transition due by now. The caller holds s.mu.
func (s *Sim) advance() {
	now := s.clock.Now()
	w := s.w
	for _, in := range w.instances.list() {
		for !in.NextTransition.IsZero() && !now.Before(in.NextTransition) {
			at := in.NextTransition
			switch in.State {
			case StatePending:
				s.setState(in, StateRunning, at, time.Time{})
			case StateRunning: // spot instance whose interruption notice ran out
				in.StateReason = "Server.SpotInstanceTermination: Spot instance termination"
				in.StateTransitionReason = fmt.Sprintf("Service initiated (%s)", at.Format("2006-01-02 15:04:05 MST"))
				s.setState(in, StateShuttingDown, at, at.Add(s.cfg.ShutdownTime))
			case StateShuttingDown:
				in.TerminatedAt = at
				s.setState(in, StateTerminated, at, time.Time{})
			default:
				in.NextTransition = time.Time{}
			}
		}
	}
	// Terminated instances drop out of sight after a while, as in EC2.
	for _, in := range w.instances.list() {
		if in.State == StateTerminated && !in.TerminatedAt.IsZero() && now.Sub(in.TerminatedAt) >= s.cfg.TerminatedVisibleFor {
			w.instances.del(in.ID)
		}
	}
}

// setState moves an instance to a new state and emits the EventBridge
// "EC2 Instance State-change Notification" the real service would.
func (s *Sim) setState(in *Instance, state string, at, next time.Time) {
	if state == StateShuttingDown && in.State != StateShuttingDown {
		s.releaseReservation(in)
	}
	in.State = state
	in.NextTransition = next
	if state == StateTerminated && in.TerminatedAt.IsZero() {
		in.TerminatedAt = at
	}
	ev := s.eventEnvelope("EC2 Instance State-change Notification", at, in.ID,
		map[string]string{"instance-id": in.ID, "state": state})
	s.w.events = append(s.w.events, ev)
}

// eventEnvelope builds an EventBridge event from source aws.ec2.
func (s *Sim) eventEnvelope(detailType string, at time.Time, instanceID string, detail any) json.RawMessage {
	w := s.w
	ev := map[string]any{
		"version":     "0",
		"id":          w.requestID(),
		"detail-type": detailType,
		"source":      "aws.ec2",
		"account":     w.account,
		"time":        at.UTC().Format(time.RFC3339),
		"region":      w.region,
		"resources":   []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", w.region, w.account, instanceID)},
		"detail":      detail,
	}
	b, _ := json.Marshal(ev)
	return b
}

// ---- The in-process control API ----

// State returns a deep copy of the current state at the current simulated time.
func (s *Sim) State() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance()
	w := s.w
	snap := Snapshot{Time: s.clock.Now(), CallCount: len(w.calls)}
	snap.AccountID, snap.Region = w.account, w.region
	snap.NoPublicParameters = true // the parameters below already include them
	for _, v := range w.subnets.list() {
		c := *v
		c.Tags = cloneTags(v.Tags)
		snap.Subnets = append(snap.Subnets, c)
	}
	for _, v := range w.sgs.list() {
		c := *v
		c.Tags = cloneTags(v.Tags)
		snap.SecurityGroups = append(snap.SecurityGroups, c)
	}
	for _, v := range w.images.list() {
		c := *v
		c.Tags = cloneTags(v.Tags)
		c.BlockDevices = slices.Clone(v.BlockDevices)
		snap.Images = append(snap.Images, c)
	}
	for _, v := range w.templates.list() {
		snap.LaunchTemplates = append(snap.LaunchTemplates, cloneTemplate(v))
	}
	for _, v := range w.instances.list() {
		snap.Instances = append(snap.Instances, cloneInstance(v))
	}
	for _, v := range w.params.list() {
		snap.Parameters = append(snap.Parameters, *v)
	}
	for _, v := range w.clusters.list() {
		c := *v
		c.Tags = cloneTags(v.Tags)
		c.SubnetIDs = slices.Clone(v.SubnetIDs)
		c.SecurityGroupIDs = slices.Clone(v.SecurityGroupIDs)
		snap.Clusters = append(snap.Clusters, c)
	}
	for _, v := range w.secrets.list() {
		snap.Secrets = append(snap.Secrets, *v)
	}
	for _, v := range w.roles.list() {
		c := *v
		c.Tags = cloneTags(v.Tags)
		snap.Roles = append(snap.Roles, c)
	}
	for _, v := range w.profiles.list() {
		snap.InstanceProfiles = append(snap.InstanceProfiles, cloneProfile(v))
	}
	for _, v := range w.reservations.list() {
		c := *v
		c.Tags = cloneTags(v.Tags)
		snap.CapacityReservations = append(snap.CapacityReservations, c)
	}
	for o, n := range w.capacity {
		snap.Capacity = append(snap.Capacity, Capacity{o, n})
	}
	sort.Slice(snap.Capacity, func(i, j int) bool { return offeringLess(snap.Capacity[i].Offering, snap.Capacity[j].Offering) })
	for o, on := range w.ice {
		if on {
			snap.ICE = append(snap.ICE, o)
		}
	}
	sort.Slice(snap.ICE, func(i, j int) bool { return offeringLess(snap.ICE[i], snap.ICE[j]) })
	for k, p := range w.spotPrices {
		snap.SpotPrices = append(snap.SpotPrices, SpotPrice{k[0], k[1], p})
	}
	sort.Slice(snap.SpotPrices, func(i, j int) bool {
		a, b := snap.SpotPrices[i], snap.SpotPrices[j]
		return a.InstanceType < b.InstanceType || a.InstanceType == b.InstanceType && a.Zone < b.Zone
	})
	for a := range w.deny {
		snap.Deny = append(snap.Deny, a)
	}
	sort.Strings(snap.Deny)
	snap.Interruptions = slices.Clone(w.interruptions)
	for _, f := range w.faults {
		snap.Faults = append(snap.Faults, *f)
	}
	return snap
}

func offeringLess(a, b Offering) bool {
	if a.InstanceType != b.InstanceType {
		return a.InstanceType < b.InstanceType
	}
	if a.Zone != b.Zone {
		return a.Zone < b.Zone
	}
	return a.CapacityType < b.CapacityType
}

func cloneInstance(v *Instance) Instance {
	c := *v
	c.Tags = cloneTags(v.Tags)
	c.SecurityGroupIDs = slices.Clone(v.SecurityGroupIDs)
	c.BlockDeviceMappings = slices.Clone(v.BlockDeviceMappings)
	if v.MetadataOptions != nil {
		m := *v.MetadataOptions
		c.MetadataOptions = &m
	}
	return c
}

func cloneTemplate(v *LaunchTemplate) LaunchTemplate {
	c := *v
	c.Tags = cloneTags(v.Tags)
	c.Data.SecurityGroupIDs = slices.Clone(v.Data.SecurityGroupIDs)
	c.Data.BlockDeviceMappings = slices.Clone(v.Data.BlockDeviceMappings)
	if v.Data.MetadataOptions != nil {
		m := *v.Data.MetadataOptions
		c.Data.MetadataOptions = &m
	}
	if v.Data.TagSpecifications != nil {
		c.Data.TagSpecifications = map[string]map[string]string{}
		for k, t := range v.Data.TagSpecifications {
			c.Data.TagSpecifications[k] = cloneTags(t)
		}
	}
	return c
}

// Instance returns one instance by ID, as of the current simulated time.
func (s *Sim) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance()
	in, ok := s.w.instances.get(id)
	if !ok {
		return Instance{}, false
	}
	return cloneInstance(in), true
}

// Apply merges more state into the simulator, as a seed file would.
func (s *Sim) Apply(seed Seed) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	seed.NoPublicParameters = true
	return s.apply(seed)
}

// AddFault scripts a fault.
func (s *Sim) AddFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	f.Hits = 0
	s.mu.Lock()
	s.w.faults = append(s.w.faults, &f)
	s.mu.Unlock()
	return nil
}

// Throttle makes the next n calls of action answer the throttling error
// (EC2: RequestLimitExceeded, HTTP 503).
func (s *Sim) Throttle(action string, n int) {
	s.AddFault(Fault{Kind: FaultThrottle, Action: action, Count: max(n, 1)})
}

// ClearFaults removes every scripted fault (ICE marks, capacities and the
// policy stay; see SetICE, SetCapacity and Allow).
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	s.w.faults = nil
	s.mu.Unlock()
}

// SetICE makes an offering answer InsufficientInstanceCapacity (on) or lifts that.
func (s *Sim) SetICE(o Offering, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.w.ice[o] = true
	} else {
		delete(s.w.ice, o)
	}
}

// SetCapacity sets how many more instances an offering can launch; n < 0 means unlimited.
func (s *Sim) SetCapacity(o Offering, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 {
		delete(s.w.capacity, o)
	} else {
		s.w.capacity[o] = n
	}
}

// SetSpotPrice overrides the catalog's spot price of a type in a zone.
func (s *Sim) SetSpotPrice(instanceType, zone string, price float64) {
	s.mu.Lock()
	s.w.spotPrices[[2]string{instanceType, zone}] = price
	s.mu.Unlock()
}

// Deny makes actions ("ec2:CreateFleet", or "CreateFleet" for any service)
// answer UnauthorizedOperation (EC2) or AccessDeniedException, DryRun included.
func (s *Sim) Deny(actions ...string) {
	s.mu.Lock()
	for _, a := range actions {
		s.w.deny[normAction(a)] = true
	}
	s.mu.Unlock()
}

// Allow lifts Deny for actions.
func (s *Sim) Allow(actions ...string) {
	s.mu.Lock()
	for _, a := range actions {
		delete(s.w.deny, normAction(a))
	}
	s.mu.Unlock()
}

// Calls returns a copy of the call log.
func (s *Sim) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.w.calls))
	for i, c := range s.w.calls {
		out[i] = c
		out[i].Params = maps.Clone(c.Params)
	}
	return out
}

// CountCalls counts logged calls of action ("" for all) answered with code
// ("" for any, CodeOK for successes).
func (s *Sim) CountCalls(action, code string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.w.calls {
		if (action == "" || strings.EqualFold(c.Action, action)) && (code == "" || c.Code == code) {
			n++
		}
	}
	return n
}

// ResetCalls empties the call log.
func (s *Sim) ResetCalls() {
	s.mu.Lock()
	s.w.calls = nil
	s.mu.Unlock()
}

// Events returns the EventBridge events the simulator has emitted so far:
// spot interruption warnings and instance state-change notifications, in order.
func (s *Sim) Events() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance()
	return slices.Clone(s.w.events)
}

// Interrupt issues a spot interruption warning for a running spot instance:
// the instance is terminated SpotNotice later in simulated time, and the
// "EC2 Spot Instance Interruption Warning" EventBridge event is returned (and
// recorded in State().Interruptions and Events()).
func (s *Sim) Interrupt(instanceID string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance()
	in, ok := s.w.instances.get(instanceID)
	if !ok {
		return nil, fmt.Errorf("awssim: interrupt: no instance %s", instanceID)
	}
	if in.CapacityType != CapacitySpot {
		return nil, fmt.Errorf("awssim: interrupt: %s is an on-demand instance; only spot instances are interrupted", instanceID)
	}
	if in.State != StateRunning && in.State != StatePending {
		return nil, fmt.Errorf("awssim: interrupt: %s is %s, not running", instanceID, in.State)
	}
	for _, it := range s.w.interruptions {
		if it.InstanceID == instanceID {
			return nil, fmt.Errorf("awssim: interrupt: %s already has an interruption notice (terminates at %s)", instanceID, it.TerminateAt.Format(time.RFC3339))
		}
	}
	now := s.clock.Now()
	if in.State == StatePending {
		s.setState(in, StateRunning, now, time.Time{})
	}
	terminateAt := now.Add(s.cfg.SpotNotice)
	in.NextTransition = terminateAt
	ev := s.eventEnvelope("EC2 Spot Instance Interruption Warning", now, instanceID,
		map[string]string{"instance-id": instanceID, "instance-action": "terminate"})
	s.w.interruptions = append(s.w.interruptions, Interruption{InstanceID: instanceID, NoticeTime: now, TerminateAt: terminateAt, Event: ev})
	s.w.events = append(s.w.events, ev)
	return ev, nil
}
