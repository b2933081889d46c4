package kube

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
)

// nominationWriters bounds the concurrent pod status writes of one decision.
const nominationWriters = 16

// NominationInput is st as nominate's decisions read it.
func (st *ClusterState) NominationInput() nominate.Input {
	return nominate.Input{Pending: st.Snapshot.Pods, Bound: st.PodsByNode, Nominated: st.NominatedByNode,
		NodeClaims: st.NodeClaims, Nodes: st.AllNodes}
}

// WriteNominations writes a nomination decision: first the NodeClaims' planned
// pods, then each pod's status.nominatedNodeName (concurrently). A NodeClaim gone
// meanwhile is skipped, as is a pod bound or deleted meanwhile (the scheduler got
// there first). It returns how many pods it nominated.
func (c *Client) WriteNominations(ctx context.Context, d nominate.Decision) (int, error) {
	var errs []error
	for _, r := range d.Records {
		if err := c.setPlannedPods(ctx, r.NodeClaim, r.Pods); err != nil {
			errs = append(errs, err)
		}
	}
	n, err := c.nominatePods(ctx, d.Nominations)
	if err != nil {
		errs = append(errs, err)
	}
	return n, joinErrs(errs)
}

func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more)", errs[0], len(errs)-1)
}

func (c *Client) setPlannedPods(ctx context.Context, claim string, pods []string) error {
	v := "null"
	if len(pods) > 0 {
		v = fmt.Sprintf("%q", nominate.PlannedPodsValue(pods))
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, nominate.PlannedPodsAnnotation, v)
	_, err := c.clients.Dynamic.Resource(NodeClaimGVR).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record planned pods on NodeClaim %s: %w", claim, err)
	}
	return nil
}

func (c *Client) nominatePods(ctx context.Context, noms []nominate.Nomination) (int, error) {
	if len(noms) == 0 {
		return 0, nil
	}
	sem := make(chan struct{}, nominationWriters)
	var mu sync.Mutex
	var errs []error
	done := 0
	var wg sync.WaitGroup
	for _, nm := range noms {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			patch := fmt.Appendf(nil, `{"status":{"nominatedNodeName":%q}}`, nm.Node)
			_, err := c.clients.Core.Pods(nm.Pod.Namespace).Patch(ctx, nm.Pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				done++
			case apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err):
			default:
				errs = append(errs, fmt.Errorf("nominate pod %s to node %s: %w", facts.PodKey(nm.Pod), nm.Node, err))
			}
		}()
	}
	wg.Wait()
	return done, joinErrs(errs)
}
