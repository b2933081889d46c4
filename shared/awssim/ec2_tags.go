package awssim

import (
	"fmt"
	"net/http"
	"strings"
)

// ---- CreateTags / DeleteTags ----

type returnOut struct {
	meta
	Return bool `xml:"return"`
}

// taggable finds the tag map of a resource by ID.
func (s *Sim) taggable(id string) (map[string]string, func(map[string]string), *apiError) {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		if in, ok := s.w.instances.get(id); ok {
			return in.Tags, func(m map[string]string) { in.Tags = m }, nil
		}
		if !instanceIDRE.MatchString(id) {
			return nil, nil, errf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	case "subnet":
		if sn, ok := s.w.subnets.get(id); ok {
			return sn.Tags, func(m map[string]string) { sn.Tags = m }, nil
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	case "sg":
		if sg, ok := s.w.sgs.get(id); ok {
			return sg.Tags, func(m map[string]string) { sg.Tags = m }, nil
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	case "ami":
		if img, ok := s.w.images.get(id); ok {
			return img.Tags, func(m map[string]string) { img.Tags = m }, nil
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	case "lt":
		if lt, ok := s.w.templates.get(id); ok {
			return lt.Tags, func(m map[string]string) { lt.Tags = m }, nil
		}
		return nil, nil, ltIDNotFound(id)
	}
	return nil, nil, errf(http.StatusBadRequest, "InvalidID", "The ID '%s' is not valid", id)
}

func (s *Sim) createTags(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	tags, err := p.tags("Tag")
	if err != nil {
		return nil, err
	}
	for k := range tags {
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return nil, errBadParam("Tag keys starting with 'aws:' are reserved for internal use")
		}
	}
	// Validate every resource first: a bad ID tags nothing.
	type target struct {
		cur map[string]string
		set func(map[string]string)
	}
	var targets []target
	for _, id := range ids {
		cur, set, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		merged := cloneTags(cur)
		for k, v := range tags {
			merged[k] = v
		}
		if len(merged) > maxTagsPerResource {
			return nil, errTagLimit()
		}
		targets = append(targets, target{merged, set})
	}
	for _, t := range targets {
		t.set(t.cur)
	}
	return &returnOut{Return: true}, nil
}

func (s *Sim) deleteTags(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	type del struct {
		key   string
		value *string
	}
	var dels []del
	for _, i := range p.indices("Tag") {
		d := del{key: p.str(fmt.Sprintf("Tag.%d.Key", i))}
		if k := fmt.Sprintf("Tag.%d.Value", i); p.has(k) {
			v := p.str(k)
			d.value = &v
		}
		dels = append(dels, d)
	}
	for _, id := range ids {
		cur, set, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		m := cloneTags(cur)
		if len(dels) == 0 {
			m = map[string]string{}
		}
		for _, d := range dels {
			if v, ok := m[d.key]; ok && (d.value == nil || *d.value == v) {
				delete(m, d.key)
			}
		}
		set(m)
	}
	return &returnOut{Return: true}, nil
}
