package kube_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

func pendingPod(t testing.TB, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	p := runningPod(name, ns, "", nil)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The scheduler's verdict, written through the status subresource.
	patch := []byte(`{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes are available"}]}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, name, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestReadStateSnapshot reads a small cluster in pages of 2 (so every list continues)
// from one resourceVersion and checks what lands where in the engine's snapshot.
func TestReadStateSnapshot(t *testing.T) {
	env := kubetest.Shared(t)
	cs, dyn := admin(t, env)
	ctx := context.Background()
	ns := "snapshot"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, dyn, nodeClass("snap"))
	mustCreate(t, dyn, pool("snap", "snap"))
	for i := 0; i < 3; i++ {
		createNode(t, cs, fmt.Sprintf("snap-%d", i), "", map[string]string{"static": "true"}, true,
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")})
		for j := 0; j < 2; j++ {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, runningPod(fmt.Sprintf("bound-%d-%d", i, j), ns, fmt.Sprintf("snap-%d", i), nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 5; i++ {
		pendingPod(t, cs, ns, fmt.Sprintf("pending-%d", i))
	}
	// Created but not yet judged by the scheduler: not pending for Joiner.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, runningPod("unjudged", ns, "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "agent"}}}}}}
	if _, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := joinerClient(t, env, "snap", nil)
	for i := 0; i < 3; i++ {
		if _, err := c.CreateNodeClaim(ctx, newClaim("snap")); err != nil {
			t.Fatal(err)
		}
	}
	c.PageSize = 2
	st, err := c.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResourceVersion == "" {
		t.Error("lists were not read at one resourceVersion")
	}
	var pending []string
	for _, p := range st.Snapshot.Pods {
		if p.Namespace == ns {
			pending = append(pending, p.Name)
		}
	}
	if len(pending) != 5 || !strings.HasPrefix(strings.Join(pending, ","), "pending-") {
		t.Errorf("pending pods %v, want pending-0..4", pending)
	}
	bound := 0
	for _, n := range st.Snapshot.Nodes {
		if n.Node.Labels["static"] == "true" && strings.HasPrefix(n.Node.Name, "snap-") {
			if len(n.Pods) != 2 {
				t.Errorf("node %s has %d pods, want 2", n.Node.Name, len(n.Pods))
			}
			bound += len(n.Pods)
		}
	}
	if bound != 6 {
		t.Errorf("%d bound pods on snap nodes, want 6", bound)
	}
	count := func(n int, what string, want int) {
		if n < want {
			t.Errorf("%s: %d, want at least %d", what, n, want)
		}
	}
	inflight := 0
	for _, nc := range st.Snapshot.InFlight {
		if nc.Labels[karpenter.NodePoolLabelKey] == "snap" {
			inflight++
		}
	}
	count(inflight, "in-flight snap claims", 3)
	count(len(st.Snapshot.DaemonSets), "daemonsets", 1)
	count(len(st.PDBs), "pdbs", 1)
	count(len(st.Snapshot.NodePools), "nodepools", 1)
	count(len(st.Snapshot.NodeClasses), "ec2nodeclasses", 1)
	count(len(st.NodeClaims), "nodeclaims", 3)
	for _, np := range st.Snapshot.NodePools {
		if np.Name == "snap" && (np.Spec.Template.Spec.NodeClassRef == nil || np.Spec.Disruption.ConsolidateAfter.String() != "10m0s") {
			t.Errorf("NodePool snap decoded as %+v", np.Spec)
		}
	}
}

// TestSelfManagedAccessEndToEnd follows seed 002's self-managed path: a ServiceAccount
// token, the API server's CA and its endpoint stored in Secrets Manager (moto) are all
// the functions need; TLS is verified against that CA.
func TestSelfManagedAccessEndToEnd(t *testing.T) {
	env := kubetest.Shared(t)
	cs, _ := admin(t, env)
	ctx := context.Background()
	tok, err := cs.CoreV1().ServiceAccounts(kube.Namespace).CreateToken(ctx, "joiner-functions",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	motoCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(mototest.New(t)),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")}
	sm := secretsmanager.NewFromConfig(motoCfg)
	body, _ := json.Marshal(access.ClusterSecret{Endpoint: env.Config.Host, CAData: base64.StdEncoding.EncodeToString(env.Config.CAData), Token: tok.Status.Token})
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("joiner/kubean-prod"), SecretString: aws.String(string(body))})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := access.FromEnv(func(k string) string {
		return map[string]string{access.EnvSecretARN: aws.ToString(out.ARN)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	defer access.ForgetSecret(aws.ToString(out.ARN))
	rc, err := access.RESTConfig(ctx, cfg, access.Deps{AWS: motoCfg})
	if err != nil {
		t.Fatal(err)
	}
	clients, err := kube.NewClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	c := kube.New(clients, kube.Options{ClusterName: "kubean-prod", Identity: "sa-test"})
	if _, err := c.ReadState(ctx); err != nil {
		t.Fatalf("read state as the ServiceAccount: %v", err)
	}
	if err := c.Lease("", 0).TryAcquire(ctx, time.Second); err != nil {
		t.Fatalf("lease as the ServiceAccount: %v", err)
	}
}
