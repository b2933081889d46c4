// Package manifest reads Kubernetes and Karpenter manifests (YAML or JSON files,
// multi-document files, folders) into a typed Bundle: NodePools, EC2NodeClasses,
// NodeClaims, Nodes, Pods (workloads expanded into their pods), DaemonSets and
// PodDisruptionBudgets. Decoding is strict: every unknown field, mistyped value,
// unfilled placeholder and Karpenter rule broken is reported as a Problem at
// file:document: field.path, with what to write instead. One bad object never spoils
// the rest: objects with errors are left out of the bundle, the others are kept.
package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Source says where an object was read: a file and the 1-based index of the
// document in it (documents are separated by "---" lines; in JSON files, each
// top-level value is one document).
type Source struct {
	File string
	Doc  int
}

// String renders "file:doc".
func (s Source) String() string { return fmt.Sprintf("%s:%d", s.File, s.Doc) }

// Problem is one thing wrong with (or, when Warning is set, changed in or doubtful
// about) an input document. Doc is 0 for problems about the file as a whole.
type Problem struct {
	File    string
	Doc     int
	Path    string
	Message string
	Warning bool
	// Runtime marks an error that does not drop the object (see karpenter.Problem).
	Runtime bool
}

// String renders "file:doc: field.path: message", prefixed "warning: " for warnings.
func (p Problem) String() string {
	var b strings.Builder
	if p.Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(p.File)
	if p.Doc > 0 {
		fmt.Fprintf(&b, ":%d", p.Doc)
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Skipped is a document holding a kind Joiner does not use (Service, ConfigMap, an
// eksctl ClusterConfig...). Note says why, for the kinds that deserve a word.
type Skipped struct {
	Source
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	Note       string
}

// KindCount counts the objects of one kind read from a file; Pods counts the pods a
// workload kind (Deployment, ReplicaSet, StatefulSet, Job) expanded into.
type KindCount struct {
	Kind  string
	Count int
	Pods  int
}

// FileSummary says what one file held.
type FileSummary struct {
	File      string
	Documents int
	// Kinds lists the objects kept, in order of first appearance.
	Kinds    []KindCount
	Skipped  int
	Errors   int
	Warnings int
}

// Bundle is everything read from a set of files. Pods includes pods bound to a node
// (spec.nodeName set) as well as pending ones; see PendingPods and BoundPods. Objects
// are kept only when they have no errors, with Karpenter's defaults applied. Pods
// expanded from one workload share the maps and slices of its template (see
// expandPods): treat the bundle as read-only, or DeepCopy an object before changing it.
type Bundle struct {
	NodePools   []*karpenter.NodePool
	NodeClasses []*karpenter.EC2NodeClass
	NodeClaims  []*karpenter.NodeClaim
	Nodes       []*corev1.Node
	Pods        []*corev1.Pod
	DaemonSets  []*appsv1.DaemonSet
	PDBs        []*policyv1.PodDisruptionBudget
	// Claims, PersistentVolumes and StorageClasses say where pods' volumes attach.
	Claims            []*corev1.PersistentVolumeClaim
	PersistentVolumes []*corev1.PersistentVolume
	StorageClasses    []*storagev1.StorageClass
	Skipped           []Skipped
	Problems          []Problem
	Files             []FileSummary

	sources map[any]Source
	// workloadSources are the documents of expanded workloads, found from a pod's
	// controller reference (cheaper than one sources entry per pod).
	workloadSources map[objKey]Source
	// seen maps each object to where it was first defined, valid or not.
	seen map[objKey]Source
	// classNames are the EC2NodeClasses defined, valid or not.
	classNames []string
	// classRefs are NodePools' nodeClassRefs, checked once every file is read.
	classRefs []classRef
	// expanded counts pods made from workloads, against MaxExpandedPods;
	// reserved counts those being made while documents are read in parallel
	// (atomically: a plain int64, so that a Bundle can still be copied).
	expanded int
	reserved int64
}

// objKey names an object for duplicate detection.
type objKey struct {
	kind, namespace, name string
}

type classRef struct {
	src  Source
	path string
	name string
	// reservedOnly: the pool's capacity-type requirement admits reserved
	// capacity and nothing else.
	reservedOnly bool
}

// MaxExpandedPods caps how many pods workloads may expand into per bundle, so a stray
// "replicas: 2000000000" is an error rather than an out-of-memory crash.
var MaxExpandedPods = 1_000_000

// New returns an empty Bundle to Add files to.
func New() *Bundle {
	return &Bundle{sources: map[any]Source{}, workloadSources: map[objKey]Source{}, seen: map[objKey]Source{}}
}

// Load reads each path (a file, or a folder searched recursively for *.yaml, *.yml
// and *.json files, in lexical order) and checks the objects against each other.
// The error is only for paths that cannot be read; everything wrong inside the files
// is in Bundle.Problems.
func Load(paths ...string) (*Bundle, error) {
	b := New()
	if len(paths) == 0 {
		return b, errors.New("no paths given")
	}
	for _, p := range paths {
		if err := b.AddPath(p); err != nil {
			return b, err
		}
	}
	b.Finish()
	return b, nil
}

// reserve claims room for n expanded pods, or reports that there is none.
func (b *Bundle) reserve(n int) bool {
	if atomic.AddInt64(&b.reserved, int64(n)) > int64(MaxExpandedPods) {
		atomic.AddInt64(&b.reserved, -int64(n))
		return false
	}
	return true
}

// Decode reads one file's content, named name in problems, and finishes the bundle.
func Decode(name string, data []byte) *Bundle {
	b := New()
	b.AddFile(name, data)
	b.Finish()
	return b
}

// AddPath reads a file or a folder into the bundle.
func (b *Bundle) AddPath(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b.AddFile(path, data)
		return nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && IsManifestFile(p) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: no *.yaml, *.yml or *.json files in this folder", path)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		b.AddFile(f, data)
	}
	return nil
}

// IsManifestFile reports whether a file in a folder is read as a manifest.
func IsManifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Finish runs the checks that need every file: NodePools naming an EC2NodeClass that
// the files do not define while defining others. Load and Decode call it.
func (b *Bundle) Finish() {
	// Only when some EC2NodeClass was given: a pool validated on its own may well use
	// a class that lives in another file.
	classes := slices.Clone(b.classNames)
	sort.Strings(classes)
	for _, r := range b.classRefs {
		if len(classes) == 0 {
			break
		}
		if _, ok := b.seen[objKey{karpenter.NodeClassKind, "", r.name}]; ok {
			continue
		}
		msg := fmt.Sprintf("EC2NodeClass %q is not among the EC2NodeClasses given (%s)", r.name, strings.Join(classes, ", "))
		if c := karpenter.Closest(r.name, classes...); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		} else {
			msg += "; it must exist in the cluster"
		}
		b.addProblem(Problem{File: r.src.File, Doc: r.src.Doc, Path: r.path, Warning: true, Message: msg})
	}
	for _, r := range b.classRefs {
		if !r.reservedOnly {
			continue
		}
		for _, nc := range b.NodeClasses {
			if nc.Name == r.name && len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
				b.addProblem(Problem{File: r.src.File, Doc: r.src.Doc, Path: strings.TrimSuffix(r.path, "nodeClassRef.name") + "requirements", Warning: true,
					Message: fmt.Sprintf("the pool allows only reserved capacity (%s In [reserved]), but EC2NodeClass %q selects no capacity reservation "+
						"(spec.capacityReservationSelectorTerms): it can launch nothing; add the reservations' id or tags to the class, or allow on-demand",
						karpenter.CapacityTypeLabelKey, r.name)})
			}
		}
	}
	b.classRefs = nil
	// Problems read file by file, document by document, whatever check found them.
	order := make(map[string]int, len(b.Files))
	for i, f := range b.Files {
		if _, ok := order[f.File]; !ok {
			order[f.File] = i
		}
	}
	sort.SliceStable(b.Problems, func(i, j int) bool {
		pi, pj := b.Problems[i], b.Problems[j]
		if order[pi.File] != order[pj.File] {
			return order[pi.File] < order[pj.File]
		}
		return pi.Doc < pj.Doc
	})
}

func (b *Bundle) addProblem(p Problem) {
	b.Problems = append(b.Problems, p)
	for i := range b.Files {
		if b.Files[i].File == p.File {
			if p.Warning {
				b.Files[i].Warnings++
			} else {
				b.Files[i].Errors++
			}
			return
		}
	}
}

// SourceOf returns where an object of the bundle (a pointer from one of its slices)
// was read. Pods expanded from a workload report the workload's document.
func (b *Bundle) SourceOf(obj any) (Source, bool) {
	if s, ok := b.sources[obj]; ok {
		return s, true
	}
	if p, ok := obj.(*corev1.Pod); ok && p != nil {
		if ref := metav1.GetControllerOf(p); ref != nil {
			s, ok := b.workloadSources[objKey{ref.Kind, p.Namespace, ref.Name}]
			return s, ok
		}
	}
	return Source{}, false
}

// HasErrors reports whether any problem is an error (not a warning).
func (b *Bundle) HasErrors() bool {
	for _, p := range b.Problems {
		if !p.Warning {
			return true
		}
	}
	return false
}

// Err returns nil when no problem is an error, else an error listing the errors one
// per line.
func (b *Bundle) Err() error {
	var lines []string
	for _, p := range b.Problems {
		if !p.Warning {
			lines = append(lines, p.String())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New(strings.Join(lines, "\n"))
}

// PendingPods returns the pods not bound to a node, in input order.
func (b *Bundle) PendingPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range b.Pods {
		if p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

// BoundPods returns the pods bound to a node (spec.nodeName), by node name.
func (b *Bundle) BoundPods() map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, p := range b.Pods {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}
