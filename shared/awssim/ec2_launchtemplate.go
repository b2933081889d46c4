package awssim

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// ---- launch templates ----

type xLaunchTemplate struct {
	LaunchTemplateID     string `xml:"launchTemplateId"`
	LaunchTemplateName   string `xml:"launchTemplateName"`
	CreateTime           string `xml:"createTime"`
	CreatedBy            string `xml:"createdBy"`
	DefaultVersionNumber int64  `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64  `xml:"latestVersionNumber"`
	Tags                 []xTag `xml:"tagSet>item"`
}

type createLaunchTemplateOut struct {
	meta
	LaunchTemplate xLaunchTemplate `xml:"launchTemplate"`
}

type describeLaunchTemplatesOut struct {
	meta
	Items     []xLaunchTemplate `xml:"launchTemplates>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

type deleteLaunchTemplateOut struct {
	meta
	LaunchTemplate xLaunchTemplate `xml:"launchTemplate"`
}

var ltNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

func (s *Sim) ltXML(lt *LaunchTemplate) xLaunchTemplate {
	return xLaunchTemplate{
		LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, CreateTime: formatTime(lt.CreateTime),
		CreatedBy:            fmt.Sprintf("arn:aws:sts::%s:assumed-role/joiner/awssim", s.w.account),
		DefaultVersionNumber: 1, LatestVersionNumber: 1, Tags: xTags(lt.Tags),
	}
}

// maxUserData is EC2's limit on user data before base64 encoding. moto does
// not check it. RunInstances and RequestLaunchTemplateData, UserData: "User
// data is limited to 16 KB."; the refusal is InvalidParameterValue ("Error
// codes for the Amazon EC2 API": "A value specified in a parameter is not
// valid, is unsupported, or cannot be used. ... The returned message provides
// an explanation of the error value."), here "User data is limited to 16384
// bytes".
const maxUserData = 16 * 1024

func checkUserData(ud string) *apiError {
	if ud == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(ud)
	if err != nil {
		return errf(http.StatusBadRequest, "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
	}
	if len(raw) > maxUserData {
		return errf(http.StatusBadRequest, "InvalidParameterValue", "User data is limited to 16384 bytes; got %d", len(raw))
	}
	return nil
}

var volumeTypes = []string{"standard", "gp2", "gp3", "io1", "io2", "st1", "sc1"}

// parseBlockDevices reads prefix.N.DeviceName / prefix.N.Ebs.*.
func parseBlockDevices(p params, prefix string) ([]BlockDeviceMapping, *apiError) {
	var out []BlockDeviceMapping
	for _, i := range p.indices(prefix) {
		k := fmt.Sprintf("%s.%d.", prefix, i)
		b := BlockDeviceMapping{DeviceName: p.str(k + "DeviceName")}
		if b.DeviceName == "" {
			return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %sDeviceName", k)
		}
		var err *apiError
		if b.VolumeSizeGiB, err = p.int(k+"Ebs.VolumeSize", 0); err != nil {
			return nil, err
		}
		if b.VolumeSizeGiB < 0 || b.VolumeSizeGiB > 65536 {
			return nil, errBadParam("Volume size %d GiB of %s is out of range", b.VolumeSizeGiB, b.DeviceName)
		}
		b.VolumeType = p.str(k + "Ebs.VolumeType")
		if b.VolumeType != "" && !slices.Contains(volumeTypes, b.VolumeType) {
			return nil, errBadParam("Value (%s) for parameter volumeType is invalid. Valid values: %s", b.VolumeType, strings.Join(volumeTypes, ", "))
		}
		if b.Encrypted, err = p.optBool(k + "Ebs.Encrypted"); err != nil {
			return nil, err
		}
		if b.DeleteOnTermination, err = p.optBool(k + "Ebs.DeleteOnTermination"); err != nil {
			return nil, err
		}
		if b.IOPS, err = p.int(k+"Ebs.Iops", 0); err != nil {
			return nil, err
		}
		if b.IOPS > 0 && b.VolumeType != "io1" && b.VolumeType != "io2" && b.VolumeType != "gp3" {
			return nil, errBadParam("Parameter iops is not supported for %s volumes.", cmpOr(b.VolumeType, "gp2"))
		}
		if b.Throughput, err = p.int(k+"Ebs.Throughput", 0); err != nil {
			return nil, err
		}
		if b.Throughput > 0 && b.VolumeType != "gp3" {
			return nil, errBadParam("Parameter throughput is only supported for gp3 volumes.")
		}
		b.KMSKeyID = p.str(k + "Ebs.KmsKeyId")
		b.SnapshotID = p.str(k + "Ebs.SnapshotId")
		out = append(out, b)
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseMetadataOptions reads and checks metadata options, which moto takes
// as given. InstanceMetadataOptionsRequest (and its launch template twin):
// HttpTokens "Valid Values: optional | required", HttpEndpoint,
// HttpProtocolIpv6 and InstanceMetadataTags "Valid Values: disabled |
// enabled", HttpPutResponseHopLimit "Possible values: Integers from 1 to 64";
// a value outside them is InvalidParameterValue ("Error codes for the Amazon
// EC2 API", as for user data), the message naming the parameter.
func parseMetadataOptions(p params, prefix string) (*MetadataOptions, *apiError) {
	has := false
	for k := range p {
		if strings.HasPrefix(k, prefix+".") {
			has = true
			break
		}
	}
	if !has {
		return nil, nil
	}
	m := &MetadataOptions{
		HTTPTokens:           p.str(prefix + ".HttpTokens"),
		HTTPEndpoint:         p.str(prefix + ".HttpEndpoint"),
		HTTPProtocolIPv6:     p.str(prefix + ".HttpProtocolIpv6"),
		InstanceMetadataTags: p.str(prefix + ".InstanceMetadataTags"),
	}
	if m.HTTPTokens != "" && m.HTTPTokens != "optional" && m.HTTPTokens != "required" {
		return nil, errBadParam("Invalid value '%s' for HttpTokens (optional | required)", m.HTTPTokens)
	}
	if m.HTTPEndpoint != "" && m.HTTPEndpoint != "enabled" && m.HTTPEndpoint != "disabled" {
		return nil, errBadParam("Invalid value '%s' for HttpEndpoint (enabled | disabled)", m.HTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 != "" && m.HTTPProtocolIPv6 != "enabled" && m.HTTPProtocolIPv6 != "disabled" {
		return nil, errBadParam("Invalid value '%s' for HttpProtocolIpv6 (enabled | disabled)", m.HTTPProtocolIPv6)
	}
	if m.InstanceMetadataTags != "" && m.InstanceMetadataTags != "enabled" && m.InstanceMetadataTags != "disabled" {
		return nil, errBadParam("Invalid value '%s' for InstanceMetadataTags (enabled | disabled)", m.InstanceMetadataTags)
	}
	hop, err := p.int(prefix+".HttpPutResponseHopLimit", 0)
	if err != nil {
		return nil, err
	}
	if hop != 0 && (hop < 1 || hop > 64) {
		return nil, errBadParam("HttpPutResponseHopLimit must be between 1 and 64, got %d", hop)
	}
	m.HTTPPutResponseHopLimit = hop
	return m, nil
}

func (s *Sim) createLaunchTemplate(p params, _ *callCtx) (ec2Body, *apiError) {
	name := p.str("LaunchTemplateName")
	if name == "" {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter LaunchTemplateName")
	}
	if !ltNameRE.MatchString(name) {
		return nil, errf(http.StatusBadRequest, "InvalidLaunchTemplateName.MalformedException",
			"A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	}
	for _, lt := range s.w.templates.list() {
		if lt.Name == name {
			return nil, errf(http.StatusBadRequest, "InvalidLaunchTemplateName.AlreadyExistsException",
				"Launch template name already in use.")
		}
	}
	const d = "LaunchTemplateData."
	data := LaunchTemplateData{
		ImageID:      p.str(d + "ImageId"),
		InstanceType: p.str(d + "InstanceType"),
		UserData:     p.str(d + "UserData"),
		KeyName:      p.str(d + "KeyName"),
	}
	if data.ImageID != "" && !amiIDRE.MatchString(data.ImageID) && !strings.HasPrefix(data.ImageID, "resolve:ssm:") {
		return nil, errf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", data.ImageID)
	}
	if data.InstanceType != "" {
		if _, ok := s.types[data.InstanceType]; !ok {
			return nil, errBadParam("Invalid value '%s' for InstanceType.", data.InstanceType)
		}
	}
	if err := checkUserData(data.UserData); err != nil {
		return nil, err
	}
	data.IAMInstanceProfile = cmpOr(p.str(d+"IamInstanceProfile.Arn"), p.str(d+"IamInstanceProfile.Name"))
	var err *apiError
	if data.CapacityReservationID, data.CapacityReservationPreference, err = parseReservationTarget(p, d+"CapacityReservationSpecification"); err != nil {
		return nil, err
	}
	data.SecurityGroupIDs = p.list(d + "SecurityGroupId")
	for _, i := range p.indices(d + "NetworkInterface") {
		data.SecurityGroupIDs = append(data.SecurityGroupIDs, p.list(fmt.Sprintf("%sNetworkInterface.%d.SecurityGroupId", d, i))...)
	}
	if data.BlockDeviceMappings, err = parseBlockDevices(p, d+"BlockDeviceMapping"); err != nil {
		return nil, err
	}
	if data.MetadataOptions, err = parseMetadataOptions(p, d+"MetadataOptions"); err != nil {
		return nil, err
	}
	specs, err := p.tagSpecs(d + "TagSpecification")
	if err != nil {
		return nil, err
	}
	if len(specs) > 0 {
		data.TagSpecifications = specs
	}
	ltSpecs, err := p.tagSpecs("TagSpecification")
	if err != nil {
		return nil, err
	}
	for rt := range ltSpecs {
		if rt != "launch-template" {
			return nil, errBadParam("'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}
	lt := &LaunchTemplate{ID: s.w.hexID("lt", 17), Name: name, CreateTime: s.clock.Now(), Tags: cloneTags(ltSpecs["launch-template"]), Data: data}
	s.w.templates.put(lt.ID, lt)
	return &createLaunchTemplateOut{LaunchTemplate: s.ltXML(lt)}, nil
}

func (s *Sim) templateByName(name string) (*LaunchTemplate, bool) {
	for _, lt := range s.w.templates.list() {
		if lt.Name == name {
			return lt, true
		}
	}
	return nil, false
}

func ltNameNotFound() *apiError {
	return errf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException",
		"At least one of the launch templates specified in the request does not exist.")
}

func ltIDNotFound(id string) *apiError {
	return errf(http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound",
		"The specified launch template, with template ID %s, does not exist.", id)
}

func (s *Sim) describeLaunchTemplates(p params, _ *callCtx) (ec2Body, *apiError) {
	ids, names := p.list("LaunchTemplateId"), p.list("LaunchTemplateName")
	for _, id := range ids {
		if _, ok := s.w.templates.get(id); !ok {
			return nil, ltIDNotFound(id)
		}
	}
	for _, n := range names {
		if _, ok := s.templateByName(n); !ok {
			return nil, ltNameNotFound()
		}
	}
	fs := p.filters()
	var items []xLaunchTemplate
	for _, lt := range s.w.templates.list() {
		if len(ids) > 0 && !slices.Contains(ids, lt.ID) || len(names) > 0 && !slices.Contains(names, lt.Name) {
			continue
		}
		ok, err := fieldFilters{
			"launch-template-name": one(lt.Name),
			"launch-template-id":   one(lt.ID),
			"create-time":          one(formatTime(lt.CreateTime)),
		}.match(fs, lt.Tags)
		if err != nil {
			return nil, err
		}
		if ok {
			items = append(items, s.ltXML(lt))
		}
	}
	start, end, next, err := page(p, "DescribeLaunchTemplates", len(items), 0, 1, 200)
	if err != nil {
		return nil, err
	}
	return &describeLaunchTemplatesOut{Items: items[start:end], NextToken: next}, nil
}

func (s *Sim) deleteLaunchTemplate(p params, _ *callCtx) (ec2Body, *apiError) {
	id, name := p.str("LaunchTemplateId"), p.str("LaunchTemplateName")
	var lt *LaunchTemplate
	switch {
	case id != "":
		var ok bool
		if lt, ok = s.w.templates.get(id); !ok {
			return nil, ltIDNotFound(id)
		}
	case name != "":
		var ok bool
		if lt, ok = s.templateByName(name); !ok {
			return nil, ltNameNotFound()
		}
	default:
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter LaunchTemplateName or LaunchTemplateId")
	}
	s.w.templates.del(lt.ID)
	return &deleteLaunchTemplateOut{LaunchTemplate: s.ltXML(lt)}, nil
}

// resolveTemplate finds the launch template of a launch specification.
func (s *Sim) resolveTemplate(id, name, version string) (*LaunchTemplate, *apiError) {
	var lt *LaunchTemplate
	var ok bool
	switch {
	case id != "":
		if lt, ok = s.w.templates.get(id); !ok {
			return nil, ltIDNotFound(id)
		}
	case name != "":
		if lt, ok = s.templateByName(name); !ok {
			return nil, ltNameNotFound()
		}
	default:
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The launch template specification must contain LaunchTemplateId or LaunchTemplateName")
	}
	switch version {
	case "", "$Latest", "$Default", "1":
	default:
		return nil, errf(http.StatusBadRequest, "InvalidLaunchTemplateId.VersionNotFound",
			"Could not find launch template version %s for launch template %s", version, lt.ID)
	}
	return lt, nil
}
