package manifest

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// kindAPIVersions says which apiVersion each kind Joiner reads lives in.
var kindAPIVersions = map[string]string{
	karpenter.NodePoolKind:  karpenter.APIVersion,
	karpenter.NodeClaimKind: karpenter.APIVersion,
	karpenter.NodeClassKind: karpenter.AWSAPIVersion,
	"Pod":                   "v1",
	"Node":                  "v1",
	"DaemonSet":             "apps/v1",
	"Deployment":            "apps/v1",
	"ReplicaSet":            "apps/v1",
	"StatefulSet":           "apps/v1",
	"Job":                   "batch/v1",
	"PodDisruptionBudget":   "policy/v1",
	// Where pods' volumes can attach bounds where they run.
	"PersistentVolumeClaim": "v1",
	"PersistentVolume":      "v1",
	"StorageClass":          "storage.k8s.io/v1",
}

var knownKinds = func() []string {
	var ks []string
	for k := range kindAPIVersions {
		ks = append(ks, k)
	}
	return ks
}()

func groupOf(apiVersion string) string {
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return g
	}
	return ""
}

// object reads one object: it decides from apiVersion and kind what it is, reports
// mistakes in those, and hands it to the reader for its kind (or records it skipped).
func (d *docCtx) object(obj map[string]any, prefix string) {
	o := &objCtx{d: d, prefix: prefix}
	apiVersion, avOK := obj["apiVersion"].(string)
	kind, kindOK := obj["kind"].(string)
	if _, present := obj["apiVersion"]; present && !avOK {
		o.errorf("apiVersion", "must be a string such as karpenter.sh/v1, got %s", describe(obj["apiVersion"]))
		return
	}
	if _, present := obj["kind"]; present && !kindOK {
		o.errorf("kind", "must be a string such as NodePool, got %s", describe(obj["kind"]))
		return
	}
	for _, f := range []struct{ path, v string }{{"apiVersion", apiVersion}, {"kind", kind}} {
		if strings.Contains(f.v, sentinelPrefix) {
			for _, m := range sentinelRe.FindAllString(f.v, -1) {
				o.errorf(f.path, "%s", placeholderMessage(d.ph.restore(m)))
			}
			return
		}
	}

	// Items of a typed list (PodList...) may omit their own apiVersion and kind.
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		itemKind := strings.TrimSuffix(kind, "List")
		for i, it := range items {
			if m, ok := it.(map[string]any); ok && itemKind != "" {
				if _, has := m["kind"]; !has {
					m["kind"] = itemKind
				}
				if _, has := m["apiVersion"]; !has {
					m["apiVersion"] = apiVersion
				}
			}
			d.tree(it, childPath(prefix, itemPath("items", i)))
		}
		return
	}

	group := groupOf(apiVersion)
	skip := func(note string) {
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		sk := Skipped{Source: d.src, APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, Note: note}
		d.later(func() {
			d.b.Skipped = append(d.b.Skipped, sk)
			d.b.Files[len(d.b.Files)-1].Skipped++
		})
	}

	switch {
	case kind == "" && apiVersion == "":
		if _, ok := obj["Statement"]; ok {
			skip("an IAM policy document, not a Kubernetes object")
			return
		}
		o.errorf("", "not a Kubernetes object: apiVersion and kind are missing (write, for example, apiVersion: karpenter.sh/v1 and kind: NodePool)")
		return
	case kind == "":
		o.errorf("kind", "kind is missing: write the object's kind, such as kind: NodePool")
		return
	case group == "eksctl.io":
		skip("eksctl's " + kind + " is input to eksctl, not a Kubernetes object; Joiner reads NodePools and EC2NodeClasses instead")
		return
	}

	// Resolve the kind Joiner will read this object as, reporting what was wrong.
	readAs := kind
	switch kind {
	case "AWSNodeClass":
		o.errorf("kind", "kind AWSNodeClass does not exist; use EC2NodeClass (apiVersion karpenter.k8s.aws/v1)")
		readAs = karpenter.NodeClassKind
	case "AWSNodeTemplate":
		o.errorf("kind", "AWSNodeTemplate (karpenter.k8s.aws/v1alpha1) was replaced by EC2NodeClass: write apiVersion: karpenter.k8s.aws/v1 and kind: EC2NodeClass, with the field changes reported below")
		readAs, apiVersion = karpenter.NodeClassKind, karpenter.AWSAPIVersion
	case "Provisioner":
		if group == karpenter.Group || group == "" {
			o.errorf("kind", "Provisioner (karpenter.sh/v1alpha5) was replaced by NodePool: write apiVersion: karpenter.sh/v1 and kind: NodePool, with the field changes reported below")
			readAs, apiVersion = karpenter.NodePoolKind, karpenter.APIVersion
		}
	case "Machine":
		if group == karpenter.Group {
			o.errorf("kind", "Machine (karpenter.sh/v1alpha5) was replaced by NodeClaim (karpenter.sh/v1); Joiner reads NodeClaims")
			return
		}
	}
	if _, known := kindAPIVersions[readAs]; !known {
		c := karpenter.Closest(kind, knownKinds...)
		isKarpenter := group == karpenter.Group || group == karpenter.AWSGroup
		switch {
		case c != "" && (isKarpenter || strings.EqualFold(c, kind)):
			o.errorf("kind", "unknown kind %q; did you mean %s (apiVersion %s)?", kind, c, kindAPIVersions[c])
			readAs = c
		case isKarpenter:
			o.errorf("kind", "Joiner does not read kind %s; the Karpenter kinds it reads are NodePool and NodeClaim (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1)", kind)
			return
		case apiVersion == "":
			o.errorf("apiVersion", "apiVersion is missing")
			return
		default:
			skip("")
			return
		}
	}

	want := kindAPIVersions[readAs]
	convert := ""
	switch {
	case apiVersion == want:
	case apiVersion == "":
		o.errorf("apiVersion", "apiVersion is missing: write apiVersion: %s", want)
	case readAs == karpenter.NodePoolKind && apiVersion == karpenter.V1beta1APIVersion:
		convert = "v1beta1"
	case readAs == karpenter.NodeClaimKind && apiVersion == karpenter.V1beta1APIVersion:
		convert = "v1beta1"
	case readAs == karpenter.NodeClassKind && apiVersion == karpenter.AWSV1beta1APIVersion:
		convert = "v1beta1"
	case groupOf(want) != groupOf(apiVersion) && groupOf(apiVersion) != "extensions":
		if groupOf(apiVersion) == karpenter.Group || groupOf(apiVersion) == karpenter.AWSGroup || groupOf(apiVersion) == "" {
			o.errorf("apiVersion", "%s belongs to %s: write apiVersion: %s", readAs, groupOf(want), want)
		} else {
			// Someone else's kind that happens to share a name (a CRD of another
			// project): not ours.
			skip("")
			return
		}
	default:
		o.errorf("apiVersion", "%s %s is not served any more: write apiVersion: %s", apiVersion, readAs, want)
	}

	// Placeholders are found before anything moves, so paths read as written.
	founds := d.ph.find(obj)
	for _, f := range founds {
		o.errorf(f.path, "%s", placeholderMessage(f.text))
	}
	for _, f := range founds {
		o.suppress(f.path)
	}
	if convert != "" {
		var ps []karpenter.Problem
		switch readAs {
		case karpenter.NodePoolKind:
			ps = karpenter.ConvertNodePoolV1beta1(obj)
		case karpenter.NodeClaimKind:
			ps = karpenter.ConvertNodeClaimV1beta1(obj)
		case karpenter.NodeClassKind:
			ps = karpenter.ConvertEC2NodeClassV1beta1(obj)
		}
		o.addAll(ps)
	}
	obj["apiVersion"], obj["kind"] = want, readAs

	switch readAs {
	case "Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job":
	default:
		d.retains = true // not audited for references into the tree
	}
	switch readAs {
	case karpenter.NodePoolKind:
		d.nodePool(o, obj)
	case karpenter.NodeClassKind:
		d.nodeClass(o, obj)
	case karpenter.NodeClaimKind:
		d.nodeClaim(o, obj)
	case "Node":
		d.node(o, obj)
	case "Pod":
		d.pod(o, obj)
	case "DaemonSet":
		d.daemonSet(o, obj)
	case "PodDisruptionBudget":
		d.pdb(o, obj)
	case "PersistentVolumeClaim":
		d.claim(o, obj)
	case "PersistentVolume":
		d.volume(o, obj)
	case "StorageClass":
		d.storageClass(o, obj)
	case "Deployment", "ReplicaSet", "StatefulSet", "Job":
		d.workload(o, obj, readAs)
	}
}

func (o *objCtx) addAll(ps []karpenter.Problem) {
	for _, p := range ps {
		if p.Runtime {
			o.addRuntime(p.Path, p.Message)
			continue
		}
		o.add(p.Path, p.Message, p.Warning)
	}
}

// meta checks metadata common to all kinds and fills the namespace of namespaced ones.
func (o *objCtx) meta(kind string, m *metav1.ObjectMeta, namespaced bool) {
	if m.Name == "" && kind != karpenter.NodePoolKind && kind != karpenter.NodeClassKind && kind != karpenter.NodeClaimKind {
		// (Karpenter kinds' Validate reports their name.)
		o.errorf("metadata.name", "metadata.name is required")
	}
	switch {
	case namespaced && m.Namespace == "":
		m.Namespace = metav1.NamespaceDefault
	case !namespaced && m.Namespace != "":
		o.warnf("metadata.namespace", "%s is cluster-scoped; namespace %q is ignored (delete it)", kind, m.Namespace)
		m.Namespace = ""
	}
	// The API server's own rules (apimachinery's validation): a name or label it
	// would refuse must not plan here as if the object existed.
	if m.Name != "" && kind != karpenter.NodePoolKind && kind != karpenter.NodeClassKind && kind != karpenter.NodeClaimKind {
		for _, msg := range apivalidation.NameIsDNSSubdomain(m.Name, false) {
			o.errorf("metadata.name", "invalid name %q: %s", clip(m.Name), msg)
		}
	}
	if namespaced {
		for _, msg := range apivalidation.ValidateNamespaceName(m.Namespace, false) {
			o.errorf("metadata.namespace", "invalid namespace %q: %s", clip(m.Namespace), msg)
		}
	}
	o.checkMeta("metadata", m)
}

// checkMeta reports labels and annotations the API server would refuse, under path
// (metadata, or spec.template.metadata for the pods a workload makes).
func (o *objCtx) checkMeta(path string, m *metav1.ObjectMeta) {
	for _, k := range sortedKeys(m.Labels) {
		p := karpenter.MapKeyPath(path+".labels", k)
		for _, e := range metav1validation.ValidateLabelName(k, fieldpath.NewPath(p)) {
			o.errorf(p, "invalid label key %q: %s", clip(k), e.Detail)
		}
		for _, msg := range content.IsLabelValue(m.Labels[k]) {
			o.errorf(p, "invalid label value %q: %s", clip(m.Labels[k]), msg)
		}
	}
	for _, e := range apivalidation.ValidateAnnotations(m.Annotations, fieldpath.NewPath(path).Child("annotations")) {
		if s, ok := e.BadValue.(string); ok {
			o.errorf(e.Field, "%q: %s", clip(s), e.Detail)
		} else {
			o.errorf(e.Field, "%s", e.Detail)
		}
	}
}

// clip shortens a value quoted in a message: a 100,000-character label is the
// problem, not something to print.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:77] + "..."
}

// keep records an object defined once, reporting a duplicate otherwise. It returns
// whether the object should be kept (no errors, not a duplicate). Invalid objects are
// recorded too, so a NodePool naming an invalid EC2NodeClass is not told it is missing.
// It reads the bundle: call it from an effect (docCtx.later).
func (o *objCtx) keep(kind, namespace, name string) bool {
	id := objKey{kind, namespace, name}
	if name != "" {
		if first, dup := o.d.b.seen[id]; dup {
			o.errorf("metadata.name", "duplicate %s %q: already defined at %s; rename or delete one", kind, qualified(namespace, name), first)
			return false
		}
		o.d.b.seen[id] = o.d.src
		if kind == karpenter.NodeClassKind {
			o.d.b.classNames = append(o.d.b.classNames, name)
		}
	}
	return o.errors == 0
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (d *docCtx) count(kind string, pods int) {
	f := &d.b.Files[len(d.b.Files)-1]
	for i := range f.Kinds {
		if f.Kinds[i].Kind == kind {
			f.Kinds[i].Count++
			f.Kinds[i].Pods += pods
			return
		}
	}
	f.Kinds = append(f.Kinds, KindCount{Kind: kind, Count: 1, Pods: pods})
}

// reservedOnly reports whether a pool's capacity-type requirements admit
// reserved capacity and neither spot nor on-demand.
func reservedOnly(np *karpenter.NodePool) bool {
	admits := func(ct string) bool {
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == karpenter.CapacityTypeLabelKey && !r.MatchesLabels(map[string]string{karpenter.CapacityTypeLabelKey: ct}) {
				return false
			}
		}
		return true
	}
	return admits(karpenter.CapacityTypeReserved) && !admits(karpenter.CapacityTypeSpot) && !admits(karpenter.CapacityTypeOnDemand)
}

func (d *docCtx) nodePool(o *objCtx, obj map[string]any) {
	limitsResourcesHint(o, obj)
	np := decodeTyped[karpenter.NodePool](o, obj, nodePoolHints, true)
	o.meta(karpenter.NodePoolKind, &np.ObjectMeta, false)
	o.addAll(np.Validate())
	np.SetDefaults()
	d.later(func() {
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name != "" {
			p := "spec.template.spec.nodeClassRef.name"
			if o.prefix != "" {
				p = o.prefix + "." + p
			}
			d.b.classRefs = append(d.b.classRefs, classRef{src: d.src, path: p, name: ref.Name, reservedOnly: reservedOnly(np)})
		}
		if o.keep(karpenter.NodePoolKind, "", np.Name) {
			d.b.NodePools = append(d.b.NodePools, np)
			d.b.sources[np] = d.src
			d.count(karpenter.NodePoolKind, 0)
		}
	})
}

// limitsResourcesHint catches the v1alpha5 "limits: {resources: {...}}" shape, which
// would otherwise read as a resource named "resources".
func limitsResourcesHint(o *objCtx, obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	limits, _ := spec["limits"].(map[string]any)
	res, ok := limits["resources"].(map[string]any)
	if !ok {
		return
	}
	flat := map[string]string{}
	for k, v := range res {
		flat[k] = fmt.Sprint(v)
	}
	o.errorf("spec.limits.resources", "limits list resources directly since v1beta1 (limits.resources is the v1alpha5 form): write limits: %s", flowMap(flat))
	o.suppress("spec.limits.resources")
	delete(limits, "resources")
}

func (d *docCtx) nodeClass(o *objCtx, obj map[string]any) {
	nc := decodeTyped[karpenter.EC2NodeClass](o, obj, nodeClassHints, true)
	o.meta(karpenter.NodeClassKind, &nc.ObjectMeta, false)
	o.addAll(nc.Validate())
	o.addAll(amifamily.CheckUserData(nc))
	nc.SetDefaults()
	d.later(func() {
		if o.keep(karpenter.NodeClassKind, "", nc.Name) {
			d.b.NodeClasses = append(d.b.NodeClasses, nc)
			d.b.sources[nc] = d.src
			d.count(karpenter.NodeClassKind, 0)
		}
	})
}

func (d *docCtx) nodeClaim(o *objCtx, obj map[string]any) {
	nc := decodeTyped[karpenter.NodeClaim](o, obj, nil, true)
	o.meta(karpenter.NodeClaimKind, &nc.ObjectMeta, false)
	o.addAll(nc.Validate())
	nc.SetDefaults()
	d.later(func() {
		if o.keep(karpenter.NodeClaimKind, "", nc.Name) {
			d.b.NodeClaims = append(d.b.NodeClaims, nc)
			d.b.sources[nc] = d.src
			d.count(karpenter.NodeClaimKind, 0)
		}
	})
}

func (d *docCtx) node(o *objCtx, obj map[string]any) {
	n := decodeTyped[corev1.Node](o, obj, nil, false)
	o.meta("Node", &n.ObjectMeta, false)
	validateTaintsCore(o, "spec.taints", n.Spec.Taints)
	checkQuantities(o, "status.capacity", n.Status.Capacity)
	checkQuantities(o, "status.allocatable", n.Status.Allocatable)
	d.later(func() {
		if o.keep("Node", "", n.Name) {
			d.b.Nodes = append(d.b.Nodes, n)
			d.b.sources[n] = d.src
			d.count("Node", 0)
		}
	})
}

func (d *docCtx) pod(o *objCtx, obj map[string]any) {
	p := decodeTyped[corev1.Pod](o, obj, nil, false)
	o.meta("Pod", &p.ObjectMeta, true)
	validatePodSpec(o, "spec", &p.Spec)
	d.later(func() {
		if o.keep("Pod", p.Namespace, p.Name) {
			d.b.Pods = append(d.b.Pods, p)
			d.b.sources[p] = d.src
			d.count("Pod", 0)
		}
	})
}

func (d *docCtx) daemonSet(o *objCtx, obj map[string]any) {
	ds := decodeTyped[appsv1.DaemonSet](o, obj, nil, false)
	o.meta("DaemonSet", &ds.ObjectMeta, true)
	checkSelector(o, ds.Spec.Selector, ds.Spec.Template.Labels, true)
	o.checkMeta("spec.template.metadata", &ds.Spec.Template.ObjectMeta)
	validatePodSpec(o, "spec.template.spec", &ds.Spec.Template.Spec)
	d.later(func() {
		if o.keep("DaemonSet", ds.Namespace, ds.Name) {
			d.b.DaemonSets = append(d.b.DaemonSets, ds)
			d.b.sources[ds] = d.src
			d.count("DaemonSet", 0)
		}
	})
}

func (d *docCtx) pdb(o *objCtx, obj map[string]any) {
	pdb := decodeTyped[policyv1.PodDisruptionBudget](o, obj, nil, false)
	o.meta("PodDisruptionBudget", &pdb.ObjectMeta, true)
	if pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil {
		o.errorf("spec", "minAvailable and maxUnavailable are mutually exclusive; keep one")
	}
	if pdb.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil {
			o.errorf("spec.selector", "invalid selector: %v", err)
		}
	}
	keepObject(d, o, "PodDisruptionBudget", pdb.Namespace, pdb.Name, pdb, &d.b.PDBs)
}

// keepObject records obj, of kind, once every document is read (see keep),
// appending it to list.
func keepObject[T any](d *docCtx, o *objCtx, kind, ns, name string, obj *T, list *[]*T) {
	d.later(func() {
		if o.keep(kind, ns, name) {
			*list = append(*list, obj)
			d.b.sources[obj] = d.src
			d.count(kind, 0)
		}
	})
}

func (d *docCtx) claim(o *objCtx, obj map[string]any) {
	c := decodeTyped[corev1.PersistentVolumeClaim](o, obj, nil, true)
	o.meta("PersistentVolumeClaim", &c.ObjectMeta, true)
	keepObject(d, o, "PersistentVolumeClaim", c.Namespace, c.Name, c, &d.b.Claims)
}

func (d *docCtx) volume(o *objCtx, obj map[string]any) {
	pv := decodeTyped[corev1.PersistentVolume](o, obj, nil, true)
	o.meta("PersistentVolume", &pv.ObjectMeta, false)
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		if _, err := nodeaffinity.NewNodeSelector(a.Required); err != nil {
			o.errorf("spec.nodeAffinity.required", "invalid node selector: %v", err)
		}
	}
	keepObject(d, o, "PersistentVolume", "", pv.Name, pv, &d.b.PersistentVolumes)
}

func (d *docCtx) storageClass(o *objCtx, obj map[string]any) {
	sc := decodeTyped[storagev1.StorageClass](o, obj, nil, false)
	o.meta("StorageClass", &sc.ObjectMeta, false)
	if m := sc.VolumeBindingMode; m != nil && *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer {
		o.errorf("volumeBindingMode", "unknown volumeBindingMode %q: write Immediate or WaitForFirstConsumer", *m)
	}
	keepObject(d, o, "StorageClass", "", sc.Name, sc, &d.b.StorageClasses)
}

// checkSelector requires a selector that matches the pod template's labels, as apps/v1
// does (required says whether the selector may be omitted).
func checkSelector(o *objCtx, sel *metav1.LabelSelector, tmplLabels map[string]string, required bool) {
	if sel == nil {
		if required {
			o.errorf("spec.selector", "spec.selector is required: write selector: {matchLabels: %s} matching spec.template.metadata.labels", flowMap(tmplLabels))
		}
		return
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		o.errorf("spec.selector", "invalid selector: %v", err)
		return
	}
	if s.Empty() && required {
		o.errorf("spec.selector", "empty selector: write selector: {matchLabels: %s} matching spec.template.metadata.labels", flowMap(tmplLabels))
		return
	}
	if !s.Matches(labels.Set(tmplLabels)) {
		o.errorf("spec.selector", "selector %s does not match spec.template.metadata.labels %s; make the template carry the selected labels", s.String(), flowMap(tmplLabels))
	}
}
