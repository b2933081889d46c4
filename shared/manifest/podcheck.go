package manifest

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// The pod checks cover what the packer reads: containers and their requests,
// tolerations, node selectors, node affinity and topology spread. Mistakes there would
// otherwise surface as a wrong placement rather than as an error.

func validatePodSpec(o *objCtx, path string, spec *corev1.PodSpec) {
	if len(spec.Containers) == 0 {
		o.errorf(path+".containers", "a pod needs at least one container: write containers: [{name: app, image: ...}]")
	}
	checkContainers := func(field string, cs []corev1.Container) {
		for i := range cs {
			c := &cs[i]
			p := itemPath(path+"."+field, i)
			if c.Name == "" {
				o.errorf(p+".name", "container name is required")
			}
			for _, name := range sortedResourceNames(c.Resources.Requests) {
				req := c.Resources.Requests[name]
				if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
					o.errorf(karpenter.MapKeyPath(p+".resources.requests", string(name)), "request %s is above the limit %s; a request may not exceed its limit", req.String(), lim.String())
				}
			}
		}
	}
	checkContainers("initContainers", spec.InitContainers)
	checkContainers("containers", spec.Containers)
	quantity.PodSpec(spec, func(field string, name corev1.ResourceName, msg string) {
		if field == "" {
			o.errorf(path, "%s: %s", name, msg)
			return
		}
		o.errorf(karpenter.MapKeyPath(path+"."+field, string(name)), "%s", msg)
	})
	for _, k := range sortedKeys(spec.NodeSelector) {
		p := karpenter.MapKeyPath(path+".nodeSelector", k)
		for _, msg := range content.IsLabelKey(k) {
			o.errorf(p, "invalid label key %q: %s", k, msg)
		}
		for _, msg := range content.IsLabelValue(spec.NodeSelector[k]) {
			o.errorf(p, "invalid label value %q: %s", spec.NodeSelector[k], msg)
		}
	}
	for i, t := range spec.Tolerations {
		p := itemPath(path+".tolerations", i)
		switch t.Operator {
		case "", corev1.TolerationOpEqual:
			if t.Key == "" {
				o.errorf(p+".operator", "a toleration without a key must use operator: Exists (it then tolerates every taint)")
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				o.errorf(p+".value", "operator Exists takes no value; delete value, or use operator: Equal")
			}
		default:
			o.errorf(p+".operator", "unknown operator %q: write Equal or Exists", t.Operator)
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			o.errorf(p+".effect", "unknown effect %q: write NoSchedule, PreferNoSchedule or NoExecute (or leave it out to match all)", t.Effect)
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			tp := path + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
			if len(r.NodeSelectorTerms) == 0 {
				o.errorf(tp, "at least one node selector term is required")
			}
			for i, term := range r.NodeSelectorTerms {
				checkNodeSelectorRequirements(o, itemPath(tp, i)+".matchExpressions", term.MatchExpressions)
			}
		}
		for i, pt := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			p := itemPath(path+".affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", i)
			if pt.Weight < 1 || pt.Weight > 100 {
				o.errorf(p+".weight", "weight %d is out of range: write 1 to 100", pt.Weight)
			}
			checkNodeSelectorRequirements(o, p+".preference.matchExpressions", pt.Preference.MatchExpressions)
		}
	}
	for i, c := range spec.TopologySpreadConstraints {
		p := itemPath(path+".topologySpreadConstraints", i)
		if c.MaxSkew < 1 {
			o.errorf(p+".maxSkew", "maxSkew must be at least 1")
		}
		if c.TopologyKey == "" {
			o.errorf(p+".topologyKey", "topologyKey is required, such as topology.kubernetes.io/zone or kubernetes.io/hostname")
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			o.errorf(p+".whenUnsatisfiable", "unknown whenUnsatisfiable %q: write DoNotSchedule or ScheduleAnyway", c.WhenUnsatisfiable)
		}
	}
}

// checkQuantities reports the entries of l that are negative or out of range.
func checkQuantities(o *objCtx, path string, l corev1.ResourceList) {
	for _, p := range quantity.List(l) {
		o.errorf(karpenter.MapKeyPath(path, string(p.Name)), "%s", p.Message)
	}
}

func checkNodeSelectorRequirements(o *objCtx, path string, reqs []corev1.NodeSelectorRequirement) {
	for i, r := range reqs {
		p := itemPath(path, i)
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				o.errorf(p+".values", "operator %s needs at least one value", r.Operator)
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				o.errorf(p+".values", "operator %s takes no values; delete values", r.Operator)
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				o.errorf(p+".values", "operator %s needs exactly one integer value", r.Operator)
			} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				o.errorf(p+".values[0]", "operator %s compares integers; %q is not one", r.Operator, r.Values[0])
			}
		default:
			o.errorf(p+".operator", "unknown operator %q: write In, NotIn, Exists, DoesNotExist, Gt or Lt", r.Operator)
		}
	}
}

func validateTaintsCore(o *objCtx, path string, taints []corev1.Taint) {
	for i, t := range taints {
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			o.errorf(itemPath(path, i)+".effect", "unknown taint effect %q: write NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
		}
	}
}

func sortedResourceNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
