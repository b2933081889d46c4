package packer

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// maxDims bounds the resource dimensions one solve tracks: cpu, memory, pods and
// up to five others (ephemeral-storage, GPUs, ...). A fixed array keeps the hot
// path free of allocations.
const maxDims = 8

// Fixed dimension indices.
const (
	dimCPU = iota
	dimMemory
	dimPods
)

// vec is a resource vector: cpu in millicores, everything else in whole units (bytes, count).
type vec [maxDims]int64

func (a vec) add(b vec) vec {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

func (a vec) sub(b vec) vec {
	for i := range a {
		a[i] -= b[i]
	}
	return a
}

// fits reports whether a ≤ b in every dimension.
func (a vec) fits(b vec) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// maxWith returns the per-dimension maximum.
func (a vec) maxWith(b vec) vec {
	for i := range a {
		if b[i] > a[i] {
			a[i] = b[i]
		}
	}
	return a
}

// dimensions maps resource names onto vec indices for one solve.
type dimensions struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

func newDimensions() *dimensions {
	d := &dimensions{index: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		d.index[n] = len(d.names)
		d.names = append(d.names, n)
	}
	return d
}

// register adds a resource name; it fails once the vector is full.
func (d *dimensions) register(n corev1.ResourceName) error {
	if _, ok := d.index[n]; ok {
		return nil
	}
	if len(d.names) == maxDims {
		return fmt.Errorf("too many distinct resource names (at most %d, including %s)", maxDims, n)
	}
	d.index[n] = len(d.names)
	d.names = append(d.names, n)
	return nil
}

// sortExtra orders the non-fixed dimensions by name so vectors are deterministic.
func (d *dimensions) sortExtra() {
	extra := append([]corev1.ResourceName(nil), d.names[3:]...)
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	d.names = append(d.names[:3], extra...)
	for i, n := range d.names {
		d.index[n] = i
	}
}

// vec converts a resource list; names not tracked are ignored (the caller registers
// every name that matters first).
func (d *dimensions) vec(rl corev1.ResourceList) vec {
	var v vec
	for n, q := range rl {
		i, ok := d.index[n]
		if !ok {
			continue
		}
		v[i] = quantityValue(n, q)
	}
	return v
}

func quantityValue(n corev1.ResourceName, q resource.Quantity) int64 {
	if n == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func formatQuantity(n corev1.ResourceName, v int64) string {
	switch {
	case n == corev1.ResourceCPU:
		if v%1000 == 0 {
			return fmt.Sprint(v / 1000)
		}
		return fmt.Sprintf("%dm", v)
	case n == corev1.ResourceMemory || n == corev1.ResourceEphemeralStorage:
		if v%(1<<30) == 0 && v != 0 {
			return fmt.Sprintf("%dGi", v>>30)
		}
		if v%(1<<20) == 0 {
			return fmt.Sprintf("%dMi", v>>20)
		}
		if v%(1<<10) == 0 {
			return fmt.Sprintf("%dKi", v>>10)
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprint(v)
}
