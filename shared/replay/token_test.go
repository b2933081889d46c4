package replay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/nodeboot"
)

// TestBootstrapTokenNeverStored replays scenario 002 (seed 002 fixed: the kubeadm
// token in an SSM SecureString, read by the node with its role at boot) and looks
// for the token everywhere Joiner writes: launch templates, instances' user data,
// the functions' logs and the replay's steps, Events, NodeClaims and Nodes. The
// nodes must still join with it: the executed user data read it from SSM and
// passed it to kubeadm.
func TestBootstrapTokenNeverStored(t *testing.T) {
	const token = "abcdef.0123456789abcdef" // 002-cpu-gpu/aws.json's parameter
	scenarios, err := LoadAll("../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(scenarios, func(sc *Scenario) bool { return sc.Name == "002-cpu-gpu" })
	if i < 0 {
		t.Fatal("scenario 002-cpu-gpu not found")
	}
	ctx := context.Background()
	var logs, steps strings.Builder
	r, err := newRun(ctx, scenarios[i], Options{Log: &logs, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.close(ctx) }()
	if r.boot == nil {
		t.Skip("user data cannot be executed here (see shared/nodeboot Available)")
	}
	if err := r.loop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.finish(ctx); err != nil {
		t.Fatal(err)
	}
	where := map[string]string{"functions' logs": logs.String(), "replay steps": steps.String()}
	st := r.sim.State()
	for _, lt := range st.LaunchTemplates {
		raw, _ := json.Marshal(lt)
		where["launch template "+lt.Name] = string(raw)
		ud, _ := base64.StdEncoding.DecodeString(lt.Data.UserData)
		where["launch template "+lt.Name+" user data"] = string(ud)
	}
	var joined []string
	for _, in := range st.Instances {
		ud, _ := base64.StdEncoding.DecodeString(in.UserData)
		where["instance "+in.ID+" user data"] = string(ud)
		if b := r.boot.Boot(ctx, in.ID); b.Err == nil && slices.ContainsFunc(b.Calls, func(c nodeboot.Call) bool { return c.Name == "kubeadm" && slices.Contains(c.Args, token) }) {
			joined = append(joined, in.ID)
		}
	}
	if len(st.LaunchTemplates) == 0 || len(joined) != len(st.Instances) || len(joined) == 0 {
		t.Fatalf("%d launch template(s); %d of %d instance(s) joined with the token read from SSM", len(st.LaunchTemplates), len(joined), len(st.Instances))
	}
	cs := r.kc.Clientset()
	evs, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	coreEvs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kst, err := kube.New(r.kc.Clients(), kube.Options{ClusterName: r.sc.Cluster, Now: r.clock.Now}).ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]any{"Events": evs, "core Events": coreEvs, "Nodes": nodes, "NodeClaims": kst.NodeClaims} {
		raw, _ := json.Marshal(obj)
		where[name] = string(raw)
	}
	if len(evs.Items) == 0 || len(kst.NodeClaims) == 0 {
		t.Fatalf("%d Events, %d NodeClaims: nothing to look in", len(evs.Items), len(kst.NodeClaims))
	}
	for name, text := range where {
		if strings.Contains(text, token) {
			t.Errorf("%s holds the bootstrap token", name)
		}
	}
}
