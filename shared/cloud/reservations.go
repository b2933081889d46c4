package cloud

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// CapacityReservation is an active on-demand capacity reservation an
// EC2NodeClass selects (capacityReservationSelectorTerms).
type CapacityReservation struct {
	ID           string
	InstanceType string
	Zone         string
	OwnerID      string
	// MatchCriteria is open or targeted; Type default or capacity-block.
	MatchCriteria string
	Type          string
	State         string
	// Available is how many more instances it can take now; Total its size.
	Available, Total int32
	EndTime          *time.Time
}

func (c CapacityReservation) status() karpenter.CapacityReservation {
	s := karpenter.CapacityReservation{AvailabilityZone: c.Zone, ID: c.ID, InstanceMatchCriteria: c.MatchCriteria,
		InstanceType: c.InstanceType, OwnerID: c.OwnerID, ReservationType: c.Type, State: "active"}
	if c.EndTime != nil {
		t := metav1.NewTime(*c.EndTime)
		s.EndTime = &t
	}
	return s
}

// CapacityReservations returns the active reservations the class's terms
// select (terms ORed; a term's id, tags and ownerID ANDed), sorted by ID, with
// their available counts as DescribeCapacityReservations reports them now.
// Expired, cancelled and pending ones are left out, as Karpenter leaves them.
func (p *Provider) CapacityReservations(ctx context.Context, nc *karpenter.EC2NodeClass) ([]CapacityReservation, error) {
	terms := nc.Spec.CapacityReservationSelectorTerms
	if len(terms) == 0 {
		return nil, nil
	}
	key := cacheKey(terms)
	p.mu.Lock()
	if c, ok := p.reservations[key]; ok {
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	found := map[string]CapacityReservation{}
	for i, t := range terms {
		in := &ec2.DescribeCapacityReservationsInput{Filters: tagFilters(t.Tags)}
		if t.ID != "" {
			in.CapacityReservationIds = []string{t.ID}
		}
		if t.OwnerID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{t.OwnerID}})
		}
		if t.ID == "" && len(t.Tags) == 0 {
			return nil, fmt.Errorf("EC2NodeClass %s: capacityReservationSelectorTerms[%d] needs an id or tags", nc.Name, i)
		}
		in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("state"), Values: []string{"active"}})
		pg := ec2.NewDescribeCapacityReservationsPaginator(p.api.EC2, in)
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return nil, wrap("DescribeCapacityReservations", err)
			}
			for _, cr := range out.CapacityReservations {
				if cr.State != ec2types.CapacityReservationStateActive {
					continue
				}
				r := CapacityReservation{
					ID: aws.ToString(cr.CapacityReservationId), InstanceType: aws.ToString(cr.InstanceType),
					Zone: aws.ToString(cr.AvailabilityZone), OwnerID: aws.ToString(cr.OwnerId),
					MatchCriteria: string(cr.InstanceMatchCriteria), Type: string(cr.ReservationType), State: string(cr.State),
					Available: aws.ToInt32(cr.AvailableInstanceCount), Total: aws.ToInt32(cr.TotalInstanceCount), EndTime: cr.EndDate,
				}
				if r.Type == "" {
					r.Type = "default"
				}
				found[r.ID] = r
			}
		}
	}
	out := make([]CapacityReservation, 0, len(found))
	for _, r := range found {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b CapacityReservation) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	p.mu.Lock()
	p.reservations[key] = out
	p.mu.Unlock()
	return out, nil
}
