// Package nodeboot boots a simulated EC2 instance far enough to see whether its
// node would join the cluster, and as what: it runs the instance's user data the
// way the AMI would, against the instance's own metadata service (awssim's IMDS
// emulator, IMDSv2 and httpTokens included), with the node agents replaced by
// recorders, and reads the join out of what was recorded.
//
//   - Shell user data (amiFamily Custom and AL2, and the text/x-shellscript parts
//     of any MIME document) runs under the real bash, each part as cloud-init
//     runs it, in a sandbox: a user and mount namespace (unshare -rm) with
//     copy-on-write overlays over /etc, /var, /opt and /root, so the script
//     writes its drop-ins and logs without touching the host. systemctl, kubeadm,
//     nodeadm, /etc/eks/bootstrap.sh, nvidia-smi, logger, modprobe, sysctl,
//     swapoff, hostnamectl and the AWS CLI are recorders (the CLI answers SSM
//     and Secrets Manager reads from the simulator). The metadata address is
//     pointed at the emulator by a curl shim first on PATH, which adds
//     --connect-to 169.254.169.254:80:127.0.0.1:<emulator port>: the script's
//     text is not changed.
//   - nodeadm (AL2023) reads the NodeConfig parts of the user data from the
//     metadata service with a session token, as its AWS SDK client does, and
//     merges them in order (later values win, kubelet flags append).
//   - Bottlerocket reads its TOML settings the same way and checks them against
//     the settings Bottlerocket documents.
//
// The join (node name, provider ID, labels, taints, API server, CA) comes from
// the recorded kubeadm join and kubelet drop-ins, the bootstrap.sh arguments
// (checked against the script's documented options), the NodeConfig or the
// settings. A boot that fails, or a join its NodeClaim would never match (the
// provider ID of another instance, an empty node name), is a Result with Err
// saying why, metadata reads refused for want of a token first.
//
// Booting is deterministic: each distinct user data (with its metadata options)
// is executed once and its join reused for later instances, their identity
// (instance ID, zone, host name) put in place of the first one's.
package nodeboot

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
)

// Join is what a node registers with: the kubelet's identity and the labels and
// taints it starts with.
type Join struct {
	// Agent is what joined: kubeadm, bootstrap.sh, nodeadm or bottlerocket.
	Agent string
	// NodeName is the Node's name.
	NodeName string
	// ProviderID is what the kubelet registers; empty when the cloud controller
	// sets it (aws:///<zone>/<instance-id>).
	ProviderID string
	// Labels and Taints are the kubelet's --node-labels and --register-with-taints.
	Labels map[string]string
	Taints []corev1.Taint
	// Endpoint is the API server the node joins; CABundle the CA it trusts
	// (base64 PEM), "" when the agent discovers it (kubeadm's token discovery).
	Endpoint, CABundle string
	// MaxPods is the kubelet's max-pods, 0 when left to the agent's default.
	MaxPods int32
}

// Call is one recorded command: its name and arguments.
type Call struct {
	Name string
	Args []string
}

// Result is one boot.
type Result struct {
	// Join is what the node registers with; nil when it never does.
	Join *Join
	// Err says why the node never registers.
	Err error
	// Calls are the node agents' recorded calls, in order.
	Calls []Call
	// IMDS are the metadata requests the boot made.
	IMDS []awssim.IMDSRequest
	// Output is the scripts' output (the tail, for diagnosis).
	Output string
}

// Cluster is what a node must join.
type Cluster struct {
	// Endpoint is the API server URL (https://host:port).
	Endpoint string
	// CABundle is the cluster CA, base64 PEM; checked when non-empty.
	CABundle string
}

// Booter boots the instances of one simulator. Safe for concurrent use; boots of
// equal user data run once.
type Booter struct {
	sim     *awssim.Sim
	cluster Cluster

	mu    sync.Mutex
	cache map[string]*cached
	runs  atomic.Int64
}

type cached struct {
	once sync.Once
	res  Result
	id   identity // of the instance that was booted
}

// identity is what differs between instances booting the same user data.
type identity struct{ id, zone, host string }

// New returns a Booter for the instances of sim joining cluster.
func New(sim *awssim.Sim, cluster Cluster) *Booter {
	return &Booter{sim: sim, cluster: cluster, cache: map[string]*cached{}}
}

// Boot boots an instance and returns what its node would register, or why it
// would not.
func (b *Booter) Boot(ctx context.Context, instanceID string) Result {
	in, ok := b.sim.Instance(instanceID)
	if !ok {
		return Result{Err: fmt.Errorf("instance %s does not exist", instanceID)}
	}
	ud, err := base64.StdEncoding.DecodeString(in.UserData)
	if err != nil {
		return Result{Err: fmt.Errorf("user data is not base64: %w", err)}
	}
	tokens, endpoint := "optional", "enabled"
	if m := in.MetadataOptions; m != nil {
		tokens, endpoint = or(m.HTTPTokens, tokens), or(m.HTTPEndpoint, endpoint)
	}
	sum := sha256.Sum256([]byte(tokens + "\x00" + endpoint + "\x00" + string(ud)))
	key := hex.EncodeToString(sum[:])
	b.mu.Lock()
	c := b.cache[key]
	if c == nil {
		c = &cached{id: identity{in.ID, in.Zone, in.PrivateDNSName}}
		b.cache[key] = c
	}
	b.mu.Unlock()
	c.once.Do(func() {
		b.runs.Add(1)
		c.res = b.boot(ctx, in, string(ud))
	})
	return c.res.as(c.id, identity{in.ID, in.Zone, in.PrivateDNSName})
}

// Executions is how many user data documents were executed (boots of equal
// user data and metadata options share one).
func (b *Booter) Executions() int { return int(b.runs.Load()) }

// as is the result for another instance that booted the same user data.
func (r Result) as(from, to identity) Result {
	if from == to {
		return r
	}
	swap := func(s string) string {
		for _, p := range [][2]string{{from.id, to.id}, {from.host, to.host}, {from.zone, to.zone}} {
			if p[0] != "" {
				s = strings.ReplaceAll(s, p[0], p[1])
			}
		}
		return s
	}
	if r.Err != nil {
		r.Err = errors.New(swap(r.Err.Error()))
	}
	if r.Join == nil {
		return r
	}
	j := *r.Join
	j.NodeName, j.ProviderID = swap(j.NodeName), swap(j.ProviderID)
	j.Labels = maps.Clone(j.Labels)
	for k, v := range j.Labels {
		j.Labels[k] = swap(v)
	}
	j.Taints = slices.Clone(j.Taints)
	r.Join = &j
	return r
}

func (b *Booter) boot(ctx context.Context, in awssim.Instance, userData string) Result {
	m := b.sim.IMDS(in.ID)
	r := boot(ctx, m, in, userData, b.store)
	r.IMDS = m.Requests()
	if r.Err == nil {
		r.Err = b.check(in, r.Join)
	}
	if r.Err != nil {
		if refused := refusedReads(r.IMDS); refused != "" {
			r.Err = fmt.Errorf("user data read instance metadata without an IMDSv2 token (HTTP 401 for %s), httpTokens being required: %w", refused, r.Err)
		}
		r.Join = nil
	}
	return r
}

// refusedReads lists the metadata paths answered 401 for want of a token.
func refusedReads(reqs []awssim.IMDSRequest) string {
	var paths []string
	for _, q := range reqs {
		if q.Status == 401 && !q.Token && !slices.Contains(paths, q.Path) {
			paths = append(paths, q.Path)
		}
	}
	return strings.Join(paths, ", ")
}

// check refuses a join its NodeClaim would never match, or that could not reach
// the cluster.
func (b *Booter) check(in awssim.Instance, j *Join) error {
	if j == nil {
		return errors.New("no node agent joined the cluster (no kubeadm join, /etc/eks/bootstrap.sh, nodeadm NodeConfig or Bottlerocket settings)")
	}
	want := "aws:///" + in.Zone + "/" + in.ID
	switch {
	case j.NodeName == "":
		return fmt.Errorf("%s joins with an empty node name", j.Agent)
	case !validNodeName(j.NodeName):
		return fmt.Errorf("%s joins with node name %q, which is not a DNS subdomain: the API server refuses the Node", j.Agent, j.NodeName)
	case j.ProviderID != "" && j.ProviderID != want:
		return fmt.Errorf("the kubelet registers provider ID %q; its NodeClaim waits for %s and never matches it", j.ProviderID, want)
	case b.cluster.Endpoint != "" && !sameEndpoint(j.Endpoint, b.cluster.Endpoint):
		return fmt.Errorf("%s joins API server %q, not the cluster's %s", j.Agent, j.Endpoint, b.cluster.Endpoint)
	case b.cluster.CABundle != "" && j.CABundle != "" && j.CABundle != b.cluster.CABundle:
		return fmt.Errorf("%s trusts a CA bundle that is not the cluster's: the TLS handshake with the API server fails", j.Agent)
	}
	return nil
}

// store is what the AWS CLI stand-in answers: the simulator's SSM parameters
// and Secrets Manager secrets, by name (and secret ARN).
func (b *Booter) store() map[string]string {
	st := b.sim.State()
	out := map[string]string{}
	for _, p := range st.Parameters {
		out[p.Name] = p.Value
	}
	for _, s := range st.Secrets {
		out[s.Name] = s.Value
		if s.ARN != "" {
			out[s.ARN] = s.Value
		}
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
