package awssim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
)

// ---- Capacity reservations (on-demand capacity reservations, ODCRs) ----

// CapacityReservation is an on-demand capacity reservation: TotalCount
// instances of one type in one zone, paid for whether used or not. A launch
// that targets it (a launch template's CapacityReservationSpecification)
// takes one of AvailableCount; terminating the instance gives it back.
type CapacityReservation struct {
	ID           string `json:"id"` // cr-…
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	TotalCount   int    `json:"totalCount"`
	// AvailableCount defaults to TotalCount.
	AvailableCount int `json:"availableCount,omitempty"`
	// InstanceMatchCriteria is "targeted" (default: only launches naming the
	// reservation use it) or "open".
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
	// ReservationType is "default" or "capacity-block".
	ReservationType string            `json:"reservationType,omitempty"`
	OwnerID         string            `json:"ownerId,omitempty"`
	State           string            `json:"state,omitempty"` // active (default), expired, cancelled, pending
	EndDate         time.Time         `json:"endDate,omitzero"`
	Created         time.Time         `json:"created,omitzero"`
	Tags            map[string]string `json:"tags,omitempty"`
}

var crIDRE = regexp.MustCompile(`^cr-[0-9a-f]{8}([0-9a-f]{9})?$`)

// fillReservation checks a seeded reservation and completes its defaults.
func (s *Sim) fillReservation(cr *CapacityReservation, now time.Time) error {
	if !crIDRE.MatchString(cr.ID) {
		return fmt.Errorf("id %q is not cr- and 8 or 17 hex digits", cr.ID)
	}
	if _, ok := s.types[cr.InstanceType]; !ok && len(s.types) > 0 {
		return fmt.Errorf("%s: instance type %q is not in the catalog", cr.ID, cr.InstanceType)
	}
	if cr.Zone == "" {
		return fmt.Errorf("%s: zone is required", cr.ID)
	}
	if cr.TotalCount <= 0 {
		return fmt.Errorf("%s: totalCount must be positive", cr.ID)
	}
	if cr.AvailableCount == 0 {
		cr.AvailableCount = cr.TotalCount
	}
	if cr.AvailableCount < 0 || cr.AvailableCount > cr.TotalCount {
		return fmt.Errorf("%s: availableCount %d is not within 0..totalCount %d", cr.ID, cr.AvailableCount, cr.TotalCount)
	}
	cr.InstanceMatchCriteria = cmpOr(cr.InstanceMatchCriteria, "targeted")
	if cr.InstanceMatchCriteria != "targeted" && cr.InstanceMatchCriteria != "open" {
		return fmt.Errorf("%s: instanceMatchCriteria %q is not open or targeted", cr.ID, cr.InstanceMatchCriteria)
	}
	cr.ReservationType = cmpOr(cr.ReservationType, "default")
	if cr.ReservationType != "default" && cr.ReservationType != "capacity-block" {
		return fmt.Errorf("%s: reservationType %q is not default or capacity-block", cr.ID, cr.ReservationType)
	}
	cr.OwnerID = cmpOr(cr.OwnerID, s.w.account)
	cr.State = cmpOr(cr.State, "active")
	if cr.Created.IsZero() {
		cr.Created = now
	}
	cr.Tags = cloneTags(cr.Tags)
	return nil
}

// reservationBlocker says why a launch into reservation id of offering o cannot
// take one more instance ("" when it can). used counts what the same call took.
func (s *Sim) reservationBlocker(id string, o Offering, used map[string]int) (code, msg string) {
	cr, ok := s.w.reservations.get(id)
	if !ok {
		return "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id)
	}
	switch {
	case cr.State != "active":
		return "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation '%s' is %s", id, cr.State)
	case o.CapacityType != CapacityOnDemand:
		return "InvalidParameterCombination", fmt.Sprintf("Capacity reservation %s serves on-demand launches only, not %s", id, o.CapacityType)
	case cr.InstanceType != o.InstanceType || cr.Zone != o.Zone:
		return "InvalidParameterValue", fmt.Sprintf("The capacity reservation '%s' is for %s in %s; it cannot launch %s in %s", id, cr.InstanceType, cr.Zone, o.InstanceType, o.Zone)
	case cr.AvailableCount-used[id] <= 0:
		return "ReservationCapacityExceeded", fmt.Sprintf("Insufficient capacity in the Capacity Reservation %s.", id)
	}
	return "", ""
}

// releaseReservation gives an instance's slot back to its reservation.
func (s *Sim) releaseReservation(in *Instance) {
	if in.CapacityReservationID == "" {
		return
	}
	if cr, ok := s.w.reservations.get(in.CapacityReservationID); ok && cr.AvailableCount < cr.TotalCount {
		cr.AvailableCount++
	}
}

type xCapacityReservation struct {
	ID                     string `xml:"capacityReservationId"`
	OwnerID                string `xml:"ownerId"`
	Arn                    string `xml:"capacityReservationArn"`
	AvailabilityZoneID     string `xml:"availabilityZoneId"`
	InstanceType           string `xml:"instanceType"`
	InstancePlatform       string `xml:"instancePlatform"`
	AvailabilityZone       string `xml:"availabilityZone"`
	Tenancy                string `xml:"tenancy"`
	TotalInstanceCount     int    `xml:"totalInstanceCount"`
	AvailableInstanceCount int    `xml:"availableInstanceCount"`
	EbsOptimized           bool   `xml:"ebsOptimized"`
	State                  string `xml:"state"`
	StartDate              string `xml:"startDate"`
	EndDate                string `xml:"endDate,omitempty"`
	EndDateType            string `xml:"endDateType"`
	InstanceMatchCriteria  string `xml:"instanceMatchCriteria"`
	CreateDate             string `xml:"createDate"`
	ReservationType        string `xml:"reservationType"`
	Tags                   []xTag `xml:"tagSet>item"`
}

type describeCapacityReservationsOut struct {
	meta
	Items     []xCapacityReservation `xml:"capacityReservationSet>item"`
	NextToken string                 `xml:"nextToken,omitempty"`
}

func (s *Sim) describeCapacityReservations(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("CapacityReservationId")
	for _, id := range ids {
		if !crIDRE.MatchString(id) {
			return nil, errf(http.StatusBadRequest, "InvalidCapacityReservationId.Malformed", "Invalid id: \"%s\" (expecting \"cr-...\")", id)
		}
		if _, ok := s.w.reservations.get(id); !ok {
			return nil, errf(http.StatusBadRequest, "InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
	}
	items, err := selectItems(p, s.w.reservations.list(), ids, func(cr *CapacityReservation) string { return cr.ID },
		func(cr *CapacityReservation) (fieldFilters, map[string]string) {
			return fieldFilters{
				"capacity-reservation-id": one(cr.ID),
				"instance-type":           one(cr.InstanceType),
				"availability-zone":       one(cr.Zone),
				"owner-id":                one(cr.OwnerID),
				"state":                   one(cr.State),
				"instance-match-criteria": one(cr.InstanceMatchCriteria),
				"reservation-type":        one(cr.ReservationType),
				"instance-platform":       one(linuxProduct),
				"tenancy":                 one("default"),
			}, cr.Tags
		}, s.capacityReservationXML)
	if err != nil {
		return nil, err
	}
	start, end, next, err := page(p, "DescribeCapacityReservations", len(items), 0, 1, 1000)
	if err != nil {
		return nil, err
	}
	return &describeCapacityReservationsOut{Items: items[start:end], NextToken: next}, nil
}

func (s *Sim) capacityReservationXML(cr *CapacityReservation) xCapacityReservation {
	x := xCapacityReservation{
		ID: cr.ID, OwnerID: cr.OwnerID, Arn: fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", s.w.region, cr.OwnerID, cr.ID),
		AvailabilityZoneID: zoneID(s.w.region, cr.Zone), InstanceType: cr.InstanceType, InstancePlatform: linuxProduct,
		AvailabilityZone: cr.Zone, Tenancy: "default", TotalInstanceCount: cr.TotalCount, AvailableInstanceCount: cr.AvailableCount,
		EbsOptimized: true, State: cr.State, StartDate: formatTime(cr.Created), EndDateType: "unlimited",
		InstanceMatchCriteria: cr.InstanceMatchCriteria, CreateDate: formatTime(cr.Created), ReservationType: cr.ReservationType,
		Tags: xTags(cr.Tags),
	}
	if !cr.EndDate.IsZero() {
		x.EndDate, x.EndDateType = formatTime(cr.EndDate), "limited"
	}
	return x
}

// parseReservationTarget reads prefix.CapacityReservationTarget.CapacityReservationId
// and prefix.CapacityReservationPreference.
func parseReservationTarget(p params, prefix string) (id, preference string, aerr *apiError) {
	id = p.str(prefix + ".CapacityReservationTarget.CapacityReservationId")
	preference = p.str(prefix + ".CapacityReservationPreference")
	if id != "" && !crIDRE.MatchString(id) {
		return "", "", errf(http.StatusBadRequest, "InvalidCapacityReservationId.Malformed", "Invalid id: \"%s\" (expecting \"cr-...\")", id)
	}
	switch preference {
	case "", "open", "none", "capacity-reservations-only":
	default:
		return "", "", errBadParam("Value (%s) for parameter capacityReservationPreference is invalid. Valid values: open, none, capacity-reservations-only", preference)
	}
	return id, preference, nil
}

// DeregisterImage: the image stops being launchable and listable. EC2 keeps
// answering for it as InvalidAMIID.Unavailable when deregistered twice.
type deregisterImageOut struct {
	meta
	Return bool `xml:"return"`
}

const imageDeregistered = "deregistered"

func (s *Sim) deregisterImage(p params, _ *callCtx) (ec2Body, *apiError) {
	id := p.str("ImageId")
	if !amiIDRE.MatchString(id) {
		return nil, errf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
	}
	img, ok := s.w.images.get(id)
	if !ok {
		return nil, errf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	}
	if img.State == imageDeregistered {
		return nil, errf(http.StatusBadRequest, "InvalidAMIID.Unavailable", "The image ID '%s' is no longer available", id)
	}
	if img.OwnerID != s.w.account {
		return nil, errf(http.StatusForbidden, "AuthFailure", "Not authorized for image:%s", id)
	}
	img.State = imageDeregistered
	return &deregisterImageOut{Return: true}, nil
}

// ReleaseAMI publishes a new image behind SSM parameters at the current
// simulated time, as AWS does when it releases an EKS-optimized or
// Bottlerocket AMI: the image is created (owned by the AMI owner, public)
// and every parameter is overwritten with its ID, their versions bumped.
// The old images stay launchable.
func (s *Sim) ReleaseAMI(img Image, parameters ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance()
	if len(parameters) == 0 {
		return fmt.Errorf("awssim: release %s: no parameter to publish it behind", img.ID)
	}
	if _, ok := s.w.images.get(img.ID); ok {
		return fmt.Errorf("awssim: release: image %s exists already", img.ID)
	}
	now := s.clock.Now()
	var base *Image
	for _, name := range parameters {
		prm, ok := s.w.params.get(name)
		if !ok {
			return fmt.Errorf("awssim: release %s: parameter %s does not exist", img.ID, name)
		}
		if prev, ok := s.w.images.get(prm.Value); ok && base == nil {
			base = prev
		}
	}
	if base != nil { // a release looks like the image it replaces unless told otherwise
		img.Architecture = cmpOr(img.Architecture, base.Architecture)
		img.OwnerID = cmpOr(img.OwnerID, base.OwnerID)
		img.OwnerAlias = cmpOr(img.OwnerAlias, base.OwnerAlias)
		img.Description = cmpOr(img.Description, base.Description)
		if len(img.BlockDevices) == 0 {
			img.BlockDevices = slices.Clone(base.BlockDevices)
			for i := range img.BlockDevices {
				img.BlockDevices[i].SnapshotID = ""
			}
		}
		img.Public = img.Public || base.Public
	}
	img.CreationDate = cmpOr(img.CreationDate, now.UTC().Format(time.RFC3339))
	if err := s.apply(Seed{NoPublicParameters: true, Images: []Image{img}}); err != nil {
		return err
	}
	for _, name := range parameters {
		prm, _ := s.w.params.get(name)
		prm.Value = img.ID
		prm.Version++
		prm.Modified = now
	}
	return nil
}

// ReleaseFamily releases a new build of an AMI family's public images for one
// Kubernetes version: every "recommended" (EKS-optimized AL2023 or AL2) or
// "latest" (Bottlerocket) parameter the family's @latest alias reads then names
// a new image called after release, as when AWS ships a new AMI behind an alias.
// family is al2023, al2 or bottlerocket. It returns the parameters republished.
func (s *Sim) ReleaseFamily(family, kubernetesVersion, release string) ([]string, error) {
	alias, err := amifamily.ParseAlias(family + "@latest")
	if err != nil {
		return nil, fmt.Errorf("awssim: release: family %q is not al2023, al2 or bottlerocket", family)
	}
	if release == "" {
		return nil, fmt.Errorf("awssim: release of %s: a release name is required", family)
	}
	latest := map[string]bool{}
	for _, p := range alias.Parameters(publicParameterRoot, kubernetesVersion) {
		latest[p.Path] = true
	}
	s.mu.Lock()
	var names []string
	for _, prm := range s.w.params.list() {
		if latest[prm.Name] {
			names = append(names, prm.Name)
		}
	}
	s.mu.Unlock()
	if len(names) == 0 {
		return nil, fmt.Errorf("awssim: release: no %s parameter for Kubernetes %s", family, kubernetesVersion)
	}
	for _, name := range names {
		h := sha256.Sum256([]byte(name + "@" + release))
		img := Image{ID: "ami-0" + hex.EncodeToString(h[:8]),
			// Named after where it is published, less the alias's .../latest/image_id tail.
			Name: strings.Trim(strings.ReplaceAll(strings.TrimPrefix(path.Dir(path.Dir(name)), publicParameterRoot+"/"), "/", "-"), "-") + "-" + release}
		if err := s.ReleaseAMI(img, name); err != nil {
			return nil, err
		}
	}
	return names, nil
}
