package awssim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// IAM (the Query protocol, Version=2010-05-08, XML in the IAM namespace): the
// roles and instance profiles a launch names. EC2 refuses a launch whose
// instance profile does not exist, so the simulator keeps them and checks.

const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

type iamHandler func(s *Sim, p params) (any, *apiError)

var iamActions = map[string]iamHandler{
	"CreateRole":                    (*Sim).iamCreateRole,
	"GetRole":                       (*Sim).iamGetRole,
	"CreateInstanceProfile":         (*Sim).iamCreateInstanceProfile,
	"GetInstanceProfile":            (*Sim).iamGetInstanceProfile,
	"DeleteInstanceProfile":         (*Sim).iamDeleteInstanceProfile,
	"AddRoleToInstanceProfile":      (*Sim).iamAddRoleToInstanceProfile,
	"RemoveRoleFromInstanceProfile": (*Sim).iamRemoveRoleFromInstanceProfile,
	"TagInstanceProfile":            (*Sim).iamTagInstanceProfile,
	"UntagInstanceProfile":          (*Sim).iamUntagInstanceProfile,
	"ListInstanceProfileTags":       (*Sim).iamListInstanceProfileTags,
	"ListInstanceProfiles":          (*Sim).iamListInstanceProfiles,
	"ListInstanceProfilesForRole":   (*Sim).iamListInstanceProfilesForRole,
}

// IAM's own limits (IAM User Guide, "IAM and AWS STS quotas"; API reference of
// CreateInstanceProfile): names of 1-128 characters of [\w+=,.@-], paths
// starting and ending with "/", at most 50 tags of 128/256 characters.
var (
	iamNameRE = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	iamPathRE = regexp.MustCompile(`^(/|/[\x21-\x7E]*/)$`)
)

const maxIAMTags = 50

func (s *Sim) serveIAM(w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeIAMError(w, "", errf(http.StatusBadRequest, "MalformedQueryString", "cannot parse the form body: %v", err))
		return
	}
	for k, v := range r.URL.Query() {
		if _, ok := form[k]; !ok {
			form[k] = v
		}
	}
	p := params(form)
	action := p.str("Action")
	call := Call{Service: "iam", Action: action, Params: summarize(form), Attempt: attemptOf(r)}

	s.mu.Lock()
	s.advance()
	reqID := s.w.requestID()
	h, known := iamActions[action]
	if !known {
		e := errf(http.StatusBadRequest, "InvalidAction", "Could not find operation %s for version 2010-05-08", action)
		s.record(call, e)
		s.mu.Unlock()
		writeIAMError(w, reqID, e)
		return
	}
	adm := s.admit("iam", action)
	s.mu.Unlock()
	s.sleepFor(r.Context(), adm)

	s.mu.Lock()
	var out any
	aerr := adm.err
	if aerr == nil {
		s.advance()
		out, aerr = h(s, p)
	}
	var resp []byte
	if aerr == nil {
		if resp, err = encodeIAM(action, out, reqID); err != nil {
			aerr = errf(http.StatusInternalServerError, "ServiceFailure", "awssim: encode %s: %v", action, err)
		}
	}
	s.record(call, aerr)
	s.mu.Unlock()

	if aerr != nil {
		writeIAMError(w, reqID, aerr)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(http.StatusOK)
	w.Write(resp)
}

type iamResponseMetadata struct {
	RequestID string `xml:"RequestId"`
}

// encodeIAM wraps a result as <ActionResponse><ActionResult>...</ActionResult>
// <ResponseMetadata/></ActionResponse>; a nil result leaves ActionResult out.
func encodeIAM(action string, result any, reqID string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: iamNamespace}}}
	if err := enc.EncodeToken(start); err != nil {
		return nil, err
	}
	if result != nil {
		if err := enc.EncodeElement(result, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
			return nil, err
		}
	}
	if err := enc.EncodeElement(iamResponseMetadata{reqID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}}); err != nil {
		return nil, err
	}
	if err := enc.EncodeToken(start.End()); err != nil {
		return nil, err
	}
	if err := enc.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type iamErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Error     iamErr   `xml:"Error"`
	RequestID string   `xml:"RequestId"`
}

type iamErr struct {
	Type    string `xml:"Type"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeIAMError(w http.ResponseWriter, reqID string, e *apiError) {
	kind := "Sender"
	if e.Status >= 500 {
		kind = "Receiver"
	}
	b, _ := xml.Marshal(iamErrorResponse{Xmlns: iamNamespace, Error: iamErr{kind, e.Code, e.Message}, RequestID: reqID})
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.Status)
	w.Write([]byte(xml.Header))
	w.Write(b)
}

// IAM's error answers, as the IAM API reference lists them for these actions.
func iamNoSuchProfile(name string) *apiError {
	return errf(http.StatusNotFound, "NoSuchEntity", "Instance Profile %s cannot be found.", name)
}

func iamNoSuchRole(name string) *apiError {
	return errf(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", name)
}

func iamValidation(format string, a ...any) *apiError {
	return errf(http.StatusBadRequest, "ValidationError", format, a...)
}

// ---- XML shapes ----

type xIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xRole struct {
	Path       string    `xml:"Path"`
	RoleName   string    `xml:"RoleName"`
	RoleID     string    `xml:"RoleId"`
	Arn        string    `xml:"Arn"`
	CreateDate string    `xml:"CreateDate"`
	Tags       []xIAMTag `xml:"Tags>member,omitempty"`
}

type xInstanceProfile struct {
	Path                string    `xml:"Path"`
	InstanceProfileName string    `xml:"InstanceProfileName"`
	InstanceProfileID   string    `xml:"InstanceProfileId"`
	Arn                 string    `xml:"Arn"`
	CreateDate          string    `xml:"CreateDate"`
	Roles               []xRole   `xml:"Roles>member"`
	Tags                []xIAMTag `xml:"Tags>member,omitempty"`
}

type roleResult struct {
	Role xRole `xml:"Role"`
}

type profileResult struct {
	InstanceProfile xInstanceProfile `xml:"InstanceProfile"`
}

type profilesResult struct {
	InstanceProfiles []xInstanceProfile `xml:"InstanceProfiles>member"`
	IsTruncated      bool               `xml:"IsTruncated"`
	Marker           string             `xml:"Marker,omitempty"`
}

type tagsResult struct {
	Tags        []xIAMTag `xml:"Tags>member"`
	IsTruncated bool      `xml:"IsTruncated"`
}

func iamTags(m map[string]string) []xIAMTag {
	var out []xIAMTag
	for _, k := range sortedKeys(m) {
		out = append(out, xIAMTag{k, m[k]})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (s *Sim) roleXML(r *Role) xRole {
	return xRole{Path: r.Path, RoleName: r.Name, RoleID: r.ID, Arn: r.ARN, CreateDate: formatTime(r.Created), Tags: iamTags(r.Tags)}
}

func (s *Sim) profileXML(ip *InstanceProfile) xInstanceProfile {
	x := xInstanceProfile{Path: ip.Path, InstanceProfileName: ip.Name, InstanceProfileID: ip.ID, Arn: ip.ARN,
		CreateDate: formatTime(ip.Created), Tags: iamTags(ip.Tags)}
	for _, rn := range ip.Roles {
		if r, ok := s.w.roles.get(rn); ok {
			rx := s.roleXML(r)
			rx.Tags = nil // IAM lists a profile's roles without their tags
			x.Roles = append(x.Roles, rx)
		}
	}
	return x
}

// ---- state helpers ----

// fillRole completes a role's generated fields.
func (s *Sim) fillRole(r *Role, now time.Time) error {
	if err := s.fillIAM("role", "AROA", r.Name, &r.Path, &r.ARN, &r.ID, &r.Created, now); err != nil {
		return err
	}
	r.Tags = cloneTags(r.Tags)
	return nil
}

// fillProfile completes an instance profile's generated fields.
func (s *Sim) fillProfile(ip *InstanceProfile, now time.Time) error {
	if err := s.fillIAM("instance-profile", "AIPA", ip.Name, &ip.Path, &ip.ARN, &ip.ID, &ip.Created, now); err != nil {
		return err
	}
	ip.Roles = slices.Clone(ip.Roles)
	ip.Tags = cloneTags(ip.Tags)
	return nil
}

// fillIAM checks an IAM entity's name and path and fills in its ARN
// (arn:aws:iam::<account>:<kind><path><name>), ID (IAM's prefix for the kind
// and 17 characters) and creation time.
func (s *Sim) fillIAM(kind, idPrefix, name string, path, arn, id *string, created *time.Time, now time.Time) error {
	if !iamNameRE.MatchString(name) {
		return fmt.Errorf("%s name %q is not 1-128 characters of letters, digits and +=,.@_-", kind, name)
	}
	if *path == "" {
		*path = "/"
	}
	if !iamPathRE.MatchString(*path) {
		return fmt.Errorf("%s %s: path %q must start and end with /", kind, name, *path)
	}
	if *arn == "" {
		*arn = fmt.Sprintf("arn:aws:iam::%s:%s%s%s", s.w.account, kind, *path, name)
	}
	if *id == "" {
		*id = idPrefix + strings.ToUpper(s.w.hexID("x", 17)[2:])
	}
	if created.IsZero() {
		*created = now
	}
	return nil
}

func cloneProfile(v *InstanceProfile) InstanceProfile {
	c := *v
	c.Roles = slices.Clone(v.Roles)
	c.Tags = cloneTags(v.Tags)
	return c
}

// profileByRef finds an instance profile by name or ARN, as a launch names it.
func (s *Sim) profileByRef(ref string) (*InstanceProfile, bool) {
	if !strings.HasPrefix(ref, "arn:") {
		return s.w.profiles.get(ref)
	}
	for _, ip := range s.w.profiles.list() {
		if ip.ARN == ref {
			return ip, true
		}
	}
	return nil, false
}

// checkInstanceProfile is EC2's check of a launch's instance profile: it must
// exist. EC2 answers InvalidParameterValue naming the parameter (the message
// Karpenter users meet when a profile is missing: aws/karpenter-provider-aws#3051).
func (s *Sim) checkInstanceProfile(ref string) (code, msg string) {
	if ref == "" {
		return "", ""
	}
	if _, ok := s.profileByRef(ref); ok {
		return "", ""
	}
	if strings.HasPrefix(ref, "arn:") {
		return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN", ref)
	}
	return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", ref)
}

// iamTagParams reads Tags.member.N.Key/Value with IAM's limits.
func iamTagParams(p params) (map[string]string, *apiError) {
	out := map[string]string{}
	for _, i := range p.indices("Tags.member") {
		k := p.str(fmt.Sprintf("Tags.member.%d.Key", i))
		v := p.str(fmt.Sprintf("Tags.member.%d.Value", i))
		if k == "" || len([]rune(k)) > 128 {
			return nil, iamValidation("1 validation error detected: Value '%s' at 'tags.%d.member.key' failed to satisfy constraint: Member must have length less than or equal to 128 and greater than or equal to 1", k, i)
		}
		if len([]rune(v)) > 256 {
			return nil, iamValidation("1 validation error detected: Value at 'tags.%d.member.value' failed to satisfy constraint: Member must have length less than or equal to 256", i)
		}
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return nil, errf(http.StatusBadRequest, "InvalidInput", "User-defined tag keys can't start with 'aws:'.")
		}
		out[k] = v
	}
	if len(out) > maxIAMTags {
		return nil, errf(http.StatusConflict, "LimitExceeded", "The number of tags has reached the maximum limit.")
	}
	return out, nil
}

func requireName(p params, key string) (string, *apiError) {
	v := p.str(key)
	if v == "" {
		return "", iamValidation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(key))
	}
	if !iamNameRE.MatchString(v) {
		return "", iamValidation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", v, lowerFirst(key))
	}
	return v, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func (s *Sim) profile(p params) (*InstanceProfile, *apiError) {
	name, err := requireName(p, "InstanceProfileName")
	if err != nil {
		return nil, err
	}
	ip, ok := s.w.profiles.get(name)
	if !ok {
		return nil, iamNoSuchProfile(name)
	}
	return ip, nil
}

// ---- actions ----

func (s *Sim) iamCreateRole(p params) (any, *apiError) {
	name, err := requireName(p, "RoleName")
	if err != nil {
		return nil, err
	}
	if p.str("AssumeRolePolicyDocument") == "" {
		return nil, iamValidation("1 validation error detected: Value null at 'assumeRolePolicyDocument' failed to satisfy constraint: Member must not be null")
	}
	if _, ok := s.w.roles.get(name); ok {
		return nil, errf(http.StatusConflict, "EntityAlreadyExists", "Role with name %s already exists.", name)
	}
	tags, err := iamTagParams(p)
	if err != nil {
		return nil, err
	}
	r := &Role{Name: name, Path: p.str("Path"), Tags: tags}
	if ferr := s.fillRole(r, s.clock.Now()); ferr != nil {
		return nil, iamValidation("%v", ferr)
	}
	s.w.roles.put(name, r)
	return roleResult{s.roleXML(r)}, nil
}

func (s *Sim) iamGetRole(p params) (any, *apiError) {
	name, err := requireName(p, "RoleName")
	if err != nil {
		return nil, err
	}
	r, ok := s.w.roles.get(name)
	if !ok {
		return nil, iamNoSuchRole(name)
	}
	return roleResult{s.roleXML(r)}, nil
}

func (s *Sim) iamCreateInstanceProfile(p params) (any, *apiError) {
	name, err := requireName(p, "InstanceProfileName")
	if err != nil {
		return nil, err
	}
	if _, ok := s.w.profiles.get(name); ok {
		return nil, errf(http.StatusConflict, "EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	tags, err := iamTagParams(p)
	if err != nil {
		return nil, err
	}
	ip := &InstanceProfile{Name: name, Path: p.str("Path"), Tags: tags}
	if ferr := s.fillProfile(ip, s.clock.Now()); ferr != nil {
		return nil, iamValidation("%v", ferr)
	}
	s.w.profiles.put(name, ip)
	return profileResult{s.profileXML(ip)}, nil
}

func (s *Sim) iamGetInstanceProfile(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	return profileResult{s.profileXML(ip)}, nil
}

func (s *Sim) iamDeleteInstanceProfile(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	if len(ip.Roles) > 0 {
		return nil, errf(http.StatusConflict, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	s.w.profiles.del(ip.Name)
	return nil, nil
}

func (s *Sim) iamAddRoleToInstanceProfile(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	role, err := requireName(p, "RoleName")
	if err != nil {
		return nil, err
	}
	if _, ok := s.w.roles.get(role); !ok {
		return nil, iamNoSuchRole(role)
	}
	if len(ip.Roles) > 0 {
		return nil, errf(http.StatusConflict, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	ip.Roles = []string{role}
	return nil, nil
}

func (s *Sim) iamRemoveRoleFromInstanceProfile(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	role, err := requireName(p, "RoleName")
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ip.Roles, role) {
		return nil, iamNoSuchRole(role)
	}
	ip.Roles = slices.DeleteFunc(ip.Roles, func(r string) bool { return r == role })
	return nil, nil
}

func (s *Sim) iamTagInstanceProfile(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	tags, err := iamTagParams(p)
	if err != nil {
		return nil, err
	}
	merged := cloneTags(ip.Tags)
	for k, v := range tags {
		merged[k] = v
	}
	if len(merged) > maxIAMTags {
		return nil, errf(http.StatusConflict, "LimitExceeded", "The number of tags has reached the maximum limit.")
	}
	ip.Tags = merged
	return nil, nil
}

func (s *Sim) iamUntagInstanceProfile(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	for _, k := range p.list("TagKeys.member") {
		delete(ip.Tags, k)
	}
	return nil, nil
}

func (s *Sim) iamListInstanceProfileTags(p params) (any, *apiError) {
	ip, err := s.profile(p)
	if err != nil {
		return nil, err
	}
	return tagsResult{Tags: iamTags(ip.Tags)}, nil
}

func (s *Sim) iamListInstanceProfiles(p params) (any, *apiError) {
	prefix := cmpOr(p.str("PathPrefix"), "/")
	var all []*InstanceProfile
	for _, ip := range s.w.profiles.list() {
		if strings.HasPrefix(ip.Path, prefix) {
			all = append(all, ip)
		}
	}
	return s.pageProfiles(p, all)
}

func (s *Sim) iamListInstanceProfilesForRole(p params) (any, *apiError) {
	role, err := requireName(p, "RoleName")
	if err != nil {
		return nil, err
	}
	if _, ok := s.w.roles.get(role); !ok {
		return nil, iamNoSuchRole(role)
	}
	var all []*InstanceProfile
	for _, ip := range s.w.profiles.list() {
		if slices.Contains(ip.Roles, role) {
			all = append(all, ip)
		}
	}
	return s.pageProfiles(p, all)
}

// pageProfiles pages a listing with IAM's Marker/MaxItems (default 100).
func (s *Sim) pageProfiles(p params, all []*InstanceProfile) (any, *apiError) {
	maxItems, err := p.int("MaxItems", 100)
	if err != nil {
		return nil, err
	}
	if maxItems < 1 || maxItems > 1000 {
		return nil, iamValidation("1 validation error detected: Value '%d' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000", maxItems)
	}
	start := 0
	if m := p.str("Marker"); m != "" {
		start = slices.IndexFunc(all, func(ip *InstanceProfile) bool { return ip.Name == m })
		if start < 0 {
			return nil, iamValidation("Invalid Marker")
		}
	}
	end := min(start+maxItems, len(all))
	out := profilesResult{}
	for _, ip := range all[start:end] {
		out.InstanceProfiles = append(out.InstanceProfiles, s.profileXML(ip))
	}
	if end < len(all) {
		out.IsTruncated, out.Marker = true, all[end].Name
	}
	return out, nil
}
