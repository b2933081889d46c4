package awssim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ---- DescribeInstances ----

type describeInstancesOut struct {
	meta
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

var instanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8}([0-9a-f]{9})?$`)

func (s *Sim) checkInstanceIDs(ids []string) *apiError {
	var missing []string
	for _, id := range ids {
		if !instanceIDRE.MatchString(id) {
			return errf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if _, ok := s.w.instances.get(id); !ok {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return errf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	default:
		return errf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
}

func (s *Sim) describeInstances(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("InstanceId")
	if len(ids) > 0 && p.has("MaxResults") {
		return nil, errf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	fs := p.filters()
	var items []*Instance
	for _, in := range s.w.instances.list() {
		if len(ids) > 0 && !slices.Contains(ids, in.ID) {
			continue
		}
		lifecycle := ""
		if in.CapacityType == CapacitySpot {
			lifecycle = "spot"
		}
		ok, err := fieldFilters{
			"instance-id":              one(in.ID),
			"instance-state-name":      one(in.State),
			"instance-state-code":      one(strconv.Itoa(stateCodes[in.State])),
			"instance-type":            one(in.InstanceType),
			"availability-zone":        one(in.Zone),
			"subnet-id":                one(in.SubnetID),
			"vpc-id":                   one(in.VpcID),
			"image-id":                 one(in.ImageID),
			"instance-lifecycle":       one(lifecycle),
			"private-dns-name":         one(in.PrivateDNSName),
			"private-ip-address":       one(in.PrivateIP),
			"reservation-id":           one(in.ReservationID),
			"spot-instance-request-id": one(in.SpotRequestID),
			"architecture":             one(in.Architecture),
			"launch-time":              one(formatTime(in.LaunchTime)),
		}.match(fs, in.Tags)
		if err != nil {
			return nil, err
		}
		if ok {
			items = append(items, in)
		}
	}
	start, end, next, err := page(p, "DescribeInstances", len(items), 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	out := &describeInstancesOut{NextToken: next}
	for _, in := range items[start:end] {
		n := len(out.Reservations)
		if n == 0 || out.Reservations[n-1].ReservationID != in.ReservationID {
			out.Reservations = append(out.Reservations, xReservation{ReservationID: cmpOr(in.ReservationID, "r-"+strings.TrimPrefix(in.ID, "i-")), OwnerID: s.w.account})
			n++
		}
		out.Reservations[n-1].Instances = append(out.Reservations[n-1].Instances, s.instanceXML(in))
	}
	return out, nil
}

// ---- TerminateInstances ----

type xStateChange struct {
	InstanceID    string `xml:"instanceId"`
	CurrentState  xState `xml:"currentState"`
	PreviousState xState `xml:"previousState"`
}

type terminateInstancesOut struct {
	meta
	Items []xStateChange `xml:"instancesSet>item"`
}

func (s *Sim) terminateInstances(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("InstanceId")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := &terminateInstancesOut{}
	for _, id := range ids {
		in, _ := s.w.instances.get(id)
		prev := in.State
		if prev == StatePending || prev == StateRunning {
			in.StateReason = "Client.UserInitiatedShutdown: User initiated shutdown"
			in.StateTransitionReason = fmt.Sprintf("User initiated (%s)", now.Format("2006-01-02 15:04:05 MST"))
			s.setState(in, StateShuttingDown, now, now.Add(s.cfg.ShutdownTime))
		}
		out.Items = append(out.Items, xStateChange{id, stateXML(in.State), stateXML(prev)})
	}
	return out, nil
}
