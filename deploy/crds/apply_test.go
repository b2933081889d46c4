package crds

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

// TestApplyKeepsNewerKarpenterCRD installs deploy/ as the README says on a real API
// server where Karpenter's Helm chart already put a newer NodePool CRD (one with a
// field this release does not have): the newer CRD stays as it was and kubectl names
// the conflict; the CRDs equal to Joiner's are shared without complaint; and a second
// apply on a cluster holding exactly Joiner's CRDs succeeds.
func TestApplyKeepsNewerKarpenterCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	if _, err := kubetest.AssetsDir(); err != nil {
		kubetest.Need(t, nil)
	}
	env, err := kubetest.Start() // deploy/crds installed, as a Karpenter release of the same version would be
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	ctx := context.Background()
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()

	// What `helm upgrade karpenter-crd` to a newer release would leave: the same CRD
	// with one more field, written by manager "helm".
	crd, err := cs.Get(ctx, "nodepools.karpenter.sh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["newerField"] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: "a field of a newer Karpenter release"}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if _, err := cs.Update(ctx, crd, metav1.UpdateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}

	out, err := env.ApplyDeploy()
	t.Logf("kubectl %s:\n%s", strings.Join(kubetest.ApplyDeployArgs("deploy"), " "), out)
	if err == nil {
		t.Fatal("apply over a newer NodePool CRD succeeded; want a conflict")
	}
	for _, want := range []string{"conflict", "helm", "--force-conflicts"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q", want)
		}
	}
	for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/nodeclaims.karpenter.sh serverside-applied",
		"customresourcedefinition.apiextensions.k8s.io/ec2nodeclasses.karpenter.k8s.aws serverside-applied", "namespace/joiner serverside-applied"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q: the objects without a conflict must still be applied", want)
		}
	}
	crd, err = cs.Get(ctx, "nodepools.karpenter.sh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["newerField"]; !ok {
		t.Error("the newer NodePool CRD lost its field: deploy/ overwrote it")
	}

	// Back to exactly Joiner's CRD (as the same Karpenter release installs it): the
	// apply shares the fields and succeeds.
	if out, err := env.Kubectl("apply", "--server-side", "--field-manager=helm", "--force-conflicts", "-f", filepath.Join(env.RepoRoot, "deploy", "crds", "karpenter.sh_nodepools.yaml")); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := env.ApplyDeploy(); err != nil {
		t.Errorf("apply over the same CRDs: %v\n%s", err, out)
	}
}
