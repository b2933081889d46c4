package awssim

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ec2Namespace is the XML namespace of every EC2 answer.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// ec2Body is an EC2 answer; each embeds meta for the requestId.
type ec2Body interface{ setRequestID(string) }

type meta struct {
	RequestID string `xml:"requestId"`
}

func (m *meta) setRequestID(id string) { m.RequestID = id }

type ec2Handler func(s *Sim, p params, c *callCtx) (ec2Body, *apiError)

// callCtx carries per-call facts from admission to the handler.
type callCtx struct {
	partial int // launch cap from a partial-fleet fault, -1 none
}

var ec2Actions = map[string]ec2Handler{
	"DescribeInstanceTypes":         (*Sim).describeInstanceTypes,
	"DescribeInstanceTypeOfferings": (*Sim).describeInstanceTypeOfferings,
	"DescribeSpotPriceHistory":      (*Sim).describeSpotPriceHistory,
	"DescribeSubnets":               (*Sim).describeSubnets,
	"DescribeSecurityGroups":        (*Sim).describeSecurityGroups,
	"DescribeImages":                (*Sim).describeImages,
	"DeregisterImage":               (*Sim).deregisterImage,
	"DescribeCapacityReservations":  (*Sim).describeCapacityReservations,
	"DescribeAvailabilityZones":     (*Sim).describeAvailabilityZones,
	"CreateLaunchTemplate":          (*Sim).createLaunchTemplate,
	"DescribeLaunchTemplates":       (*Sim).describeLaunchTemplates,
	"DeleteLaunchTemplate":          (*Sim).deleteLaunchTemplate,
	"CreateFleet":                   (*Sim).createFleet,
	"RunInstances":                  (*Sim).runInstances,
	"DescribeInstances":             (*Sim).describeInstances,
	"CreateTags":                    (*Sim).createTags,
	"DeleteTags":                    (*Sim).deleteTags,
	"TerminateInstances":            (*Sim).terminateInstances,
}

// serveEC2 answers one EC2 Query request.
func (s *Sim) serveEC2(w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		s.writeEC2Error(w, "", errf(http.StatusBadRequest, "MalformedQueryString", "cannot parse the form body: %v", err))
		return
	}
	for k, v := range r.URL.Query() { // the CLI and some tools put parameters in the URL
		if _, ok := form[k]; !ok {
			form[k] = v
		}
	}
	p := params(form)
	action := p.str("Action")
	call := Call{Service: "ec2", Action: action, Params: summarize(form), Attempt: attemptOf(r), DryRun: p.bool("DryRun")}

	s.mu.Lock()
	s.advance()
	reqID := s.w.requestID()
	h, known := ec2Actions[action]
	if !known {
		e := errf(http.StatusBadRequest, "InvalidAction", "The action %s is not valid for this web service.", action)
		if action == "" {
			e = errf(http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action")
		}
		s.record(call, e)
		s.mu.Unlock()
		s.writeEC2Error(w, reqID, e)
		return
	}
	adm := s.admit("ec2", action)
	s.mu.Unlock()
	s.sleepFor(r.Context(), adm)

	s.mu.Lock()
	var (
		resp []byte
		aerr = adm.err
	)
	if aerr == nil && call.DryRun {
		aerr = errf(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	token := p.str("ClientToken")
	idemKey := action + "\x00" + token
	if aerr == nil && token != "" && idempotentActions[action] {
		// EC2 answers a repeated client token with the first call's result, so
		// an SDK retry of a launch whose answer was lost launches nothing twice.
		if prev, ok := s.w.idempotent[idemKey]; ok {
			if prev.params != paramsDigest(form) {
				aerr = errf(http.StatusBadRequest, "IdempotentParameterMismatch",
					"Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
			} else {
				resp = prev.body
				call.Params["ClientToken"] = token + " (replayed)"
			}
		}
	}
	if aerr == nil && resp == nil {
		s.advance()
		var out ec2Body
		out, aerr = h(s, p, &callCtx{partial: adm.partial})
		if aerr == nil {
			out.setRequestID(reqID)
			var err error
			if resp, err = encodeEC2(action, out); err != nil {
				aerr = errf(http.StatusInternalServerError, "InternalError", "awssim: encode %s: %v", action, err)
			} else if token != "" && idempotentActions[action] {
				s.w.remember(idemKey, idempotentResult{paramsDigest(form), resp})
			}
		}
	}
	s.record(call, aerr)
	s.mu.Unlock()

	if aerr != nil {
		s.writeEC2Error(w, reqID, aerr)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(http.StatusOK)
	w.Write(resp)
}

// idempotentActions take a ClientToken (the SDK fills one in for each).
var idempotentActions = map[string]bool{"RunInstances": true, "CreateFleet": true, "CreateLaunchTemplate": true}

// maxIdempotent bounds the remembered client tokens; EC2 forgets them too.
const maxIdempotent = 10000

func (w *world) remember(key string, r idempotentResult) {
	if _, ok := w.idempotent[key]; !ok {
		w.idemOrder = append(w.idemOrder, key)
	}
	w.idempotent[key] = r
	for len(w.idemOrder) > maxIdempotent {
		delete(w.idempotent, w.idemOrder[0])
		w.idemOrder = w.idemOrder[1:]
	}
}

type idempotentResult struct {
	params string
	body   []byte
}

// paramsDigest identifies a request's parameters, ignoring the token itself.
func paramsDigest(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		if k != "ClientToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%q\n", k, form[k])
	}
	return string(h.Sum(nil))
}

func encodeEC2(action string, out ec2Body) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}}}
	if err := enc.EncodeElement(out, start); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type ec2ErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Errors    []ec2Err `xml:"Errors>Error"`
	RequestID string   `xml:"RequestID"`
}

type ec2Err struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (s *Sim) writeEC2Error(w http.ResponseWriter, reqID string, e *apiError) {
	b, _ := xml.Marshal(ec2ErrorResponse{Errors: []ec2Err{{e.Code, e.Message}}, RequestID: reqID})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.Status)
	w.Write([]byte(xml.Header))
	w.Write(b)
}

// summarize keeps a call's parameters readable in the log.
func summarize(form url.Values) map[string]string {
	out := make(map[string]string, len(form))
	for k, v := range form {
		if k == "Action" || k == "Version" || len(v) == 0 {
			continue
		}
		val := v[0]
		if strings.HasSuffix(k, "UserData") {
			val = fmt.Sprintf("<%d bytes of base64>", len(val))
		} else if len(val) > 120 {
			val = val[:120] + fmt.Sprintf("...(%d bytes)", len(val))
		}
		out[k] = val
	}
	return out
}

// params reads EC2 Query parameters: flattened lists are Key.1, Key.2, ...;
// nested structures are Key.Sub.
type params url.Values

func (p params) str(key string) string {
	if v := url.Values(p)[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (p params) has(key string) bool { _, ok := p[key]; return ok }

func (p params) bool(key string) bool { return strings.EqualFold(p.str(key), "true") }

// optBool returns nil when key is absent.
func (p params) optBool(key string) (*bool, *apiError) {
	v := p.str(key)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, errBadParam("Invalid value '%s' for %s: expected a boolean", v, key)
	}
	return &b, nil
}

func (p params) int(key string, def int) (int, *apiError) {
	v := p.str(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errBadParam("Invalid value '%s' for %s: expected an integer", v, key)
	}
	return n, nil
}

func (p params) float(key string) (float64, bool, *apiError) {
	v := p.str(key)
	if v == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false, errBadParam("Invalid value '%s' for %s: expected a number", v, key)
	}
	return f, true, nil
}

// indices lists, in order, the N of every parameter named prefix.N or prefix.N.*.
func (p params) indices(prefix string) []int {
	seen := map[int]bool{}
	pre := prefix + "."
	for k := range p {
		if !strings.HasPrefix(k, pre) {
			continue
		}
		rest := k[len(pre):]
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[:i]
		}
		if n, err := strconv.Atoi(rest); err == nil {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list returns the values of prefix.1, prefix.2, ...
func (p params) list(prefix string) []string {
	var out []string
	for _, i := range p.indices(prefix) {
		if v := p.str(fmt.Sprintf("%s.%d", prefix, i)); v != "" {
			out = append(out, v)
		}
	}
	return out
}

type filter struct {
	name   string
	values []string
}

func (p params) filters() []filter {
	var out []filter
	for _, i := range p.indices("Filter") {
		out = append(out, filter{
			name:   p.str(fmt.Sprintf("Filter.%d.Name", i)),
			values: p.list(fmt.Sprintf("Filter.%d.Value", i)),
		})
	}
	return out
}

// tags reads prefix.N.Key / prefix.N.Value.
func (p params) tags(prefix string) (map[string]string, *apiError) {
	out := map[string]string{}
	for _, i := range p.indices(prefix) {
		k := p.str(fmt.Sprintf("%s.%d.Key", prefix, i))
		if k == "" {
			return nil, errf(http.StatusBadRequest, "InvalidParameterValue", "Tag keys must not be empty")
		}
		if len(k) > 128 {
			return nil, errBadParam("Tag key exceeds the maximum length of 128 characters: %s", k)
		}
		v := p.str(fmt.Sprintf("%s.%d.Value", prefix, i))
		if len(v) > 256 {
			return nil, errBadParam("Tag value exceeds the maximum length of 256 characters (key %s)", k)
		}
		out[k] = v
	}
	return out, nil
}

// tagSpecs reads prefix.N.ResourceType / prefix.N.Tag.M.
func (p params) tagSpecs(prefix string) (map[string]map[string]string, *apiError) {
	out := map[string]map[string]string{}
	for _, i := range p.indices(prefix) {
		rt := p.str(fmt.Sprintf("%s.%d.ResourceType", prefix, i))
		if rt == "" {
			return nil, errf(http.StatusBadRequest, "InvalidParameterValue", "%s.%d.ResourceType is required", prefix, i)
		}
		t, err := p.tags(fmt.Sprintf("%s.%d.Tag", prefix, i))
		if err != nil {
			return nil, err
		}
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		for k, v := range t {
			if strings.HasPrefix(strings.ToLower(k), "aws:") {
				return nil, errBadParam("Tag keys starting with 'aws:' are reserved for internal use")
			}
			out[rt][k] = v
		}
		if len(out[rt]) > maxTagsPerResource {
			return nil, errTagLimit()
		}
	}
	return out, nil
}

// matchValue reports whether v matches an EC2 filter value, which may use the
// wildcards * (any run) and ? (any one character); \ escapes them.
func matchValue(pattern, v string) bool {
	if !strings.ContainsAny(pattern, `*?\`) {
		return pattern == v
	}
	return wildcard([]rune(pattern), []rune(v))
}

func wildcard(p, s []rune) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			if len(p) == 0 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if wildcard(p, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			p, s = p[1:], s[1:]
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
	}
	return len(s) == 0
}

func matchAny(values []string, v string) bool {
	for _, pat := range values {
		if matchValue(pat, v) {
			return true
		}
	}
	return false
}

// tagFilter applies the tag:K, tag-key and tag-value filters; ok is false
// when the filter is not a tag filter.
func tagFilter(f filter, tags map[string]string) (match, ok bool) {
	switch {
	case strings.HasPrefix(f.name, "tag:"):
		v, has := tags[f.name[4:]]
		return has && matchAny(f.values, v), true
	case f.name == "tag-key":
		for k := range tags {
			if matchAny(f.values, k) {
				return true, true
			}
		}
		return false, true
	case f.name == "tag-value":
		for _, v := range tags {
			if matchAny(f.values, v) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// fieldFilters maps filter names to the value(s) of a resource they test.
type fieldFilters map[string]func() []string

// match applies all filters (AND across filters, OR across values).
func (ff fieldFilters) match(fs []filter, tags map[string]string) (bool, *apiError) {
	for _, f := range fs {
		if m, ok := tagFilter(f, tags); ok {
			if !m {
				return false, nil
			}
			continue
		}
		get, known := ff[f.name]
		if !known {
			return false, errBadParam("The filter '%s' is invalid", f.name)
		}
		hit := false
		for _, v := range get() {
			if matchAny(f.values, v) {
				hit = true
				break
			}
		}
		if !hit {
			return false, nil
		}
	}
	return true, nil
}

func one(v string) func() []string { return func() []string { return []string{v} } }

// selectItems is the middle of a Describe* over one table: the items the
// request's IDs (none: every item) and Filter.N select, in table order, each
// rendered. fields gives an item's filterable fields and its tags.
func selectItems[T, X any](p params, items []*T, ids []string, id func(*T) string, fields func(*T) (fieldFilters, map[string]string), render func(*T) X) ([]X, *apiError) {
	fs := p.filters()
	var out []X
	for _, it := range items {
		if len(ids) > 0 && !slices.Contains(ids, id(it)) {
			continue
		}
		ff, tags := fields(it)
		ok, err := ff.match(fs, tags)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, render(it))
		}
	}
	return out, nil
}

// page applies MaxResults/NextToken to n items; the token is an opaque offset.
func page(p params, action string, n, def, lo, hi int) (start, end int, next string, err *apiError) {
	size := def
	if p.has("MaxResults") {
		m, e := p.int("MaxResults", def)
		if e != nil {
			return 0, 0, "", e
		}
		if m < lo || m > hi {
			return 0, 0, "", errBadParam("MaxResults must be between %d and %d, got %d", lo, hi, m)
		}
		size = m
	}
	if tok := p.str("NextToken"); tok != "" {
		off, ok := decodeToken(tok, action)
		if !ok || off > n {
			return 0, 0, "", errf(http.StatusBadRequest, "InvalidPaginationToken", "The pagination token is invalid or expired")
		}
		start = off
	}
	if size <= 0 {
		return start, n, "", nil
	}
	end = min(start+size, n)
	if end < n {
		next = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d", action, end))
	}
	return start, end, next, nil
}

func decodeToken(tok, action string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	act, offStr, ok := strings.Cut(string(b), ":")
	if !ok || act != action {
		return 0, false
	}
	off, err := strconv.Atoi(offStr)
	return off, err == nil && off >= 0
}

// ---- XML shapes shared by several answers ----

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xTags(m map[string]string) []xTag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]xTag, 0, len(keys))
	for _, k := range keys {
		out = append(out, xTag{k, m[k]})
	}
	return out
}
