package catalog

import "strings"

// Name derivation follows Karpenter (aws/karpenter-provider-aws,
// pkg/providers/instancetype/types.go, computeRequirements):
//
//   - category and generation are groups 1 and 3 of
//     `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.` — m7i-flex.large → m, 7;
//     u-6tb1.56xlarge → u, 1; inf2.xlarge → inf, 2;
//   - family and size are the two halves of the name split at "." when there
//     are exactly two — m7i-flex.large → m7i-flex, large.
//
// Karpenter derives nothing from a name without a dot. Joiner goes one step
// further so that synthetic catalogs (Karpenter's benchmark types are named
// fake-it-<i>) still carry usable labels: a trailing "-<digits>" is the size
// and the rest the family (fake-it-12 → family fake-it, size 12), the category
// is the family's leading letters (fake) and the generation stays empty.

// Family returns the instance family, e.g. "m6i" for m6i.large.
func (it *InstanceType) Family() string { return Family(it.Name) }

// Category returns the instance category, e.g. "m" for m6i.large.
func (it *InstanceType) Category() string { return Category(it.Name) }

// Generation returns the instance generation, e.g. "6" for m6i.large.
func (it *InstanceType) Generation() string { return Generation(it.Name) }

// Size returns the instance size, e.g. "large" for m6i.large.
func (it *InstanceType) Size() string { return Size(it.Name) }

// Family derives the instance family from an instance-type name ("" when none).
func Family(name string) string {
	family, _ := familySize(name)
	return family
}

// Size derives the instance size from an instance-type name ("" when none).
func Size(name string) string {
	_, size := familySize(name)
	return size
}

// Category derives the instance category from an instance-type name ("" when none).
func Category(name string) string {
	if cat, _, ok := categoryGeneration(name); ok {
		return cat
	}
	if strings.Contains(name, ".") {
		return ""
	}
	family := Family(name)
	i := 0
	for i < len(family) && isLower(family[i]) {
		i++
	}
	return family[:i]
}

// Generation derives the instance generation from an instance-type name ("" when none).
func Generation(name string) string {
	_, gen, _ := categoryGeneration(name)
	return gen
}

func familySize(name string) (family, size string) {
	if dot := strings.IndexByte(name, '.'); dot >= 0 {
		if strings.IndexByte(name[dot+1:], '.') >= 0 {
			return "", "" // Karpenter requires exactly two parts
		}
		return name[:dot], name[dot+1:]
	}
	if dash := strings.LastIndexByte(name, '-'); dash > 0 && dash < len(name)-1 && allDigits(name[dash+1:]) {
		return name[:dash], name[dash+1:]
	}
	return name, ""
}

// categoryGeneration matches Karpenter's `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`
// by hand: the engine derives labels for every type it considers, and a regexp
// per call would dominate that cost. names_test.go checks the equivalence
// against the regexp itself.
func categoryGeneration(name string) (category, generation string, ok bool) {
	i := 0
	for i < len(name) && isLower(name[i]) {
		i++
	}
	if i == 0 {
		return "", "", false
	}
	start := i
	// The optional "-<digits>tb" group is taken only when digits follow it;
	// otherwise the regexp backtracks to the branch without it, which then fails
	// on the '-', exactly as here.
	if i < len(name) && name[i] == '-' {
		k := i + 1
		for k < len(name) && isDigit(name[k]) {
			k++
		}
		if k > i+1 && strings.HasPrefix(name[k:], "tb") && k+2 < len(name) && isDigit(name[k+2]) {
			start = k + 2
		}
	}
	end := start
	for end < len(name) && isDigit(name[end]) {
		end++
	}
	if end == start || strings.IndexByte(name[end:], '.') < 0 {
		return "", "", false
	}
	return name[:i], name[start:end], true
}

func isLower(b byte) bool { return b >= 'a' && b <= 'z' }
func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}
