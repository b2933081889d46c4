package bootstrap

import (
	"fmt"
	"strconv"
	"strings"
)

// renderAL2 puts the class's user data first (its parts when MIME, else one
// shell part) and then the EKS bootstrap.sh call, in one MIME document: the
// user's commands run before the node joins, as on EKS managed node groups.
func renderAL2(o Options) (string, error) {
	if o.ClusterName == "" || o.ClusterEndpoint == "" {
		return "", fmt.Errorf("amiFamily AL2: the cluster name and endpoint are required")
	}
	var parts []Part
	switch ud := o.UserData; {
	case strings.TrimSpace(ud) == "":
	case IsMIME(ud):
		p, err := ParseMIME(ud)
		if err != nil {
			return "", fmt.Errorf("amiFamily AL2: spec.userData: %w", err)
		}
		parts = p
	default:
		parts = []Part{newPart(ContentTypeShell, ud)}
	}
	parts = append(parts, newPart(ContentTypeShell, al2Script(o)))
	return WriteMIME(parts)
}

func al2Script(o Options) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	b.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh does not accept --flag=value: values go after a space.
	fmt.Fprintf(&b, "/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s'", o.ClusterName, o.ClusterEndpoint)
	if o.CABundle != "" {
		fmt.Fprintf(&b, " --b64-cluster-ca '%s'", o.CABundle)
	}
	if kc := o.Kubelet; kc != nil && len(kc.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " \\\n--dns-cluster-ip '%s'", kc.ClusterDNS[0])
	}
	mp := o.maxPods()
	if mp > 0 {
		// Otherwise bootstrap.sh computes its own ENI-based value and ignores ours.
		b.WriteString(" \\\n--use-max-pods false")
	}
	args := []string{}
	if labels := KubeletLabels(o.Labels); len(labels) > 0 {
		args = append(args, "--node-labels="+LabelsFlag(labels))
	}
	args = append(args, "--register-with-taints="+TaintsFlag(NodeTaints(o.Taints)))
	if mp > 0 {
		args = append(args, "--max-pods="+strconv.Itoa(int(mp)))
	}
	if kc := o.Kubelet; kc != nil {
		for _, f := range []struct {
			flag, op string
			m        map[string]string
		}{
			{"--system-reserved", "=", kc.SystemReserved}, {"--kube-reserved", "=", kc.KubeReserved},
			{"--eviction-hard", "<", kc.EvictionHard}, {"--eviction-soft", "<", kc.EvictionSoft},
		} {
			if len(f.m) > 0 {
				args = append(args, f.flag+"="+sortedPairs(f.m, f.op, ","))
			}
		}
		if kc.PodsPerCore != nil {
			args = append(args, "--pods-per-core="+strconv.Itoa(int(*kc.PodsPerCore)))
		}
	}
	fmt.Fprintf(&b, " \\\n--kubelet-extra-args '%s'\n", strings.Join(args, " "))
	return b.String()
}
