package awssim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ---- SSM (awsJson1_1, X-Amz-Target: AmazonSSM.<Action>) ----

type ssmHandler func(s *Sim, body map[string]any) (any, *apiError)

var ssmActions = map[string]ssmHandler{
	"GetParameter":    (*Sim).ssmGetParameter,
	"GetParameters":   (*Sim).ssmGetParameters,
	"PutParameter":    (*Sim).ssmPutParameter,
	"DeleteParameter": (*Sim).ssmDeleteParameter,
}

const jsonContentType = "application/x-amz-json-1.1"

func (s *Sim) serveSSM(w http.ResponseWriter, r *http.Request, raw []byte) {
	target := r.Header.Get("X-Amz-Target")
	action := strings.TrimPrefix(target, "AmazonSSM.")
	var body map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			writeJSONError(w, http.StatusBadRequest, "SerializationException", "awssim: request body is not a JSON object: "+err.Error(), "")
			return
		}
	}
	s.serveJSONCall(w, r, "ssm", action, body, func() (any, *apiError) {
		h, ok := ssmActions[action]
		if !ok {
			return nil, errf(http.StatusBadRequest, "UnknownOperationException", "awssim does not implement SSM action %q (X-Amz-Target %q)", action, target)
		}
		return h(s, body)
	}, jsonContentType)
}

// serveJSONCall runs admission, the handler and the call log for the JSON services.
func (s *Sim) serveJSONCall(w http.ResponseWriter, r *http.Request, service, action string, body map[string]any, h func() (any, *apiError), contentType string) {
	call := Call{Service: service, Action: action, Params: summarizeJSON(body), Attempt: attemptOf(r)}
	s.mu.Lock()
	s.advance()
	reqID := s.w.requestID()
	adm := s.admit(service, action)
	s.mu.Unlock()
	s.sleepFor(r.Context(), adm)

	s.mu.Lock()
	var out any
	aerr := adm.err
	if aerr == nil {
		s.advance()
		out, aerr = h()
	}
	s.record(call, aerr)
	s.mu.Unlock()
	if aerr != nil {
		writeJSONError(w, aerr.Status, aerr.Code, aerr.Message, reqID)
		return
	}
	writeJSON(w, http.StatusOK, contentType, reqID, out)
}

// summarizeJSON keeps top-level scalars of a request for the call log; a
// parameter or secret value is logged only as its length.
func summarizeJSON(body map[string]any) map[string]string {
	if len(body) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range body {
		switch {
		case k == "Value" || k == "SecretString":
			out[k] = fmt.Sprintf("<%d bytes>", len(fmt.Sprint(v)))
		default:
			b, _ := json.Marshal(v)
			sv := strings.Trim(string(b), `"`)
			if len(sv) > 120 {
				sv = sv[:120] + fmt.Sprintf("...(%d bytes)", len(sv))
			}
			out[k] = sv
		}
	}
	return out
}

func jsonStr(body map[string]any, k string) string {
	if v, ok := body[k].(string); ok {
		return v
	}
	return ""
}

func jsonBool(body map[string]any, k string) bool {
	v, _ := body[k].(bool)
	return v
}

type ssmParameter struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
	Selector         string  `json:"Selector,omitempty"`
}

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func (s *Sim) ssmParam(p *Parameter, decrypt bool, selector string) ssmParameter {
	v := p.Value
	if p.Type == "SecureString" && !decrypt {
		// Without WithDecryption SSM hands back the KMS ciphertext, never the value.
		v = base64.StdEncoding.EncodeToString([]byte("awssim-kms-ciphertext:" + strconv.FormatInt(p.Version, 10) + ":" + p.Name))
	}
	name := strings.TrimPrefix(p.Name, "/")
	return ssmParameter{
		ARN:      fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", s.w.region, s.ssmOwner(p.Name), name),
		DataType: p.DataType, LastModifiedDate: epoch(p.Modified), Name: p.Name, Type: p.Type, Value: v, Version: p.Version,
		Selector: selector,
	}
}

func (s *Sim) ssmOwner(name string) string {
	if strings.HasPrefix(name, "/aws/service/") {
		return "aws"
	}
	return s.w.account
}

// lookupParam resolves "name" or "name:version".
func (s *Sim) lookupParam(ref string) (*Parameter, string, *apiError) {
	name, selector := ref, ""
	if i := strings.LastIndexByte(ref, ':'); i > 0 && !strings.HasPrefix(ref, "arn:") {
		name, selector = ref[:i], ref[i:]
	}
	p, ok := s.w.params.get(name)
	if !ok {
		return nil, "", errf(http.StatusBadRequest, "ParameterNotFound", "Parameter %s not found.", ref)
	}
	if selector != "" {
		v, err := strconv.ParseInt(selector[1:], 10, 64)
		if err != nil || v != p.Version {
			return nil, "", errf(http.StatusBadRequest, "ParameterVersionNotFound", "Systems Manager could not find version %s of %s.", selector[1:], name)
		}
	}
	return p, selector, nil
}

func (s *Sim) ssmGetParameter(body map[string]any) (any, *apiError) {
	ref := jsonStr(body, "Name")
	if ref == "" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	p, sel, err := s.lookupParam(ref)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Parameter": s.ssmParam(p, jsonBool(body, "WithDecryption"), sel)}, nil
}

func (s *Sim) ssmGetParameters(body map[string]any) (any, *apiError) {
	names, _ := body["Names"].([]any)
	if len(names) == 0 || len(names) > 10 {
		return nil, errf(http.StatusBadRequest, "ValidationException", "Names must hold 1 to 10 parameter names, got %d", len(names))
	}
	out := map[string]any{"Parameters": []ssmParameter{}, "InvalidParameters": []string{}}
	var found []ssmParameter
	var invalid []string
	for _, n := range names {
		ref, _ := n.(string)
		p, sel, err := s.lookupParam(ref)
		if err != nil {
			invalid = append(invalid, ref)
			continue
		}
		found = append(found, s.ssmParam(p, jsonBool(body, "WithDecryption"), sel))
	}
	if found != nil {
		out["Parameters"] = found
	}
	if invalid != nil {
		out["InvalidParameters"] = invalid
	}
	return out, nil
}

func (s *Sim) ssmPutParameter(body map[string]any) (any, *apiError) {
	name, value := jsonStr(body, "Name"), jsonStr(body, "Value")
	if name == "" || value == "" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "PutParameter needs a Name and a non-empty Value")
	}
	if low := strings.ToLower(strings.TrimLeft(name, "/")); strings.HasPrefix(low, "aws") || strings.HasPrefix(low, "ssm") {
		if strings.HasPrefix(strings.ToLower(name), "/aws") && strings.Count(name, "/") > 1 {
			return nil, errf(http.StatusBadRequest, "AccessDeniedException", "No access to reserved parameter name: %s.", name)
		}
		return nil, errf(http.StatusBadRequest, "ValidationException", `Parameter name: can't be prefixed with "aws" or "ssm" (case-insensitive).`)
	}
	typ := jsonStr(body, "Type")
	if typ != "" && typ != "String" && typ != "StringList" && typ != "SecureString" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value '%s' at 'type' failed to satisfy constraint: Member must satisfy enum value set: [SecureString, StringList, String]", typ)
	}
	dataType := cmpOr(jsonStr(body, "DataType"), "text")
	if dataType != "text" && dataType != "aws:ec2:image" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "The following data type is not supported: %s (supported data types are: aws:ec2:image, text)", dataType)
	}
	if dataType == "aws:ec2:image" && !amiIDRE.MatchString(value) {
		return nil, errf(http.StatusBadRequest, "ValidationException", "Parameter value %s is not a valid EC2 image ID", value)
	}
	// SSM's limits by tier (Intelligent-Tiering is answered as Standard: it is
	// documented to upgrade, but is seen refusing a long value as Standard does).
	tier := cmpOr(jsonStr(body, "Tier"), "Standard")
	switch tier {
	case "Standard", "Intelligent-Tiering":
		if len(value) > 4096 {
			return nil, errf(http.StatusBadRequest, "ValidationException", "Standard tier parameters support a maximum parameter value of 4096 characters. To create a larger parameter value, upgrade the parameter to use the advanced-parameter tier. For more information, see https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html")
		}
		tier = "Standard"
	case "Advanced":
		if len(value) > 8192 {
			return nil, errf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'value' failed to satisfy constraint: Member must have length less than or equal to 8192")
		}
	default:
		return nil, errf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value '%s' at 'tier' failed to satisfy constraint: Member must satisfy enum value set: [Advanced, Intelligent-Tiering, Standard]", tier)
	}
	now := s.clock.Now()
	if old, ok := s.w.params.get(name); ok {
		if !jsonBool(body, "Overwrite") {
			return nil, errf(http.StatusBadRequest, "ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
		}
		old.Value, old.Version, old.Modified = value, old.Version+1, now
		if typ != "" {
			old.Type = typ
		}
		old.DataType = dataType
		return map[string]any{"Version": old.Version, "Tier": tier}, nil
	}
	if typ == "" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "A parameter type is required when you create a parameter.")
	}
	s.w.params.put(name, &Parameter{Name: name, Value: value, Type: typ, DataType: dataType, Version: 1, Modified: now})
	return map[string]any{"Version": 1, "Tier": tier}, nil
}

func (s *Sim) ssmDeleteParameter(body map[string]any) (any, *apiError) {
	name := jsonStr(body, "Name")
	if _, ok := s.w.params.get(name); !ok {
		return nil, errf(http.StatusBadRequest, "ParameterNotFound", "Parameter %s not found.", name)
	}
	s.w.params.del(name)
	return map[string]any{}, nil
}

// ---- EKS (restJson1) ----

const eksContentType = "application/json"

func (s *Sim) serveEKS(w http.ResponseWriter, r *http.Request, raw []byte) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	var action, name string
	switch {
	case path == "/clusters" && r.Method == http.MethodGet:
		action = "ListClusters"
	case path == "/clusters" && r.Method == http.MethodPost:
		action = "CreateCluster"
	case strings.HasPrefix(path, "/clusters/") && strings.Count(path, "/") == 2:
		name, _ = url.PathUnescape(strings.TrimPrefix(path, "/clusters/"))
		switch r.Method {
		case http.MethodGet:
			action = "DescribeCluster"
		case http.MethodDelete:
			action = "DeleteCluster"
		}
	}
	var body map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			writeJSONError(w, http.StatusBadRequest, "InvalidRequestException", "awssim: request body is not a JSON object: "+err.Error(), "")
			return
		}
	}
	if name != "" {
		if body == nil {
			body = map[string]any{}
		}
		body["name"] = name
	}
	s.serveJSONCall(w, r, "eks", cmpOr(action, "Unknown"), body, func() (any, *apiError) {
		switch action {
		case "DescribeCluster":
			c, ok := s.w.clusters.get(name)
			if !ok {
				return nil, errf(http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: %s.", name)
			}
			return map[string]any{"cluster": s.eksCluster(c)}, nil
		case "ListClusters":
			names := []string{}
			for _, c := range s.w.clusters.list() {
				names = append(names, c.Name)
			}
			return map[string]any{"clusters": names}, nil
		case "CreateCluster":
			return s.eksCreateCluster(body)
		case "DeleteCluster":
			c, ok := s.w.clusters.get(name)
			if !ok {
				return nil, errf(http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: %s.", name)
			}
			s.w.clusters.del(name)
			out := s.eksCluster(c)
			out["status"] = "DELETING"
			return map[string]any{"cluster": out}, nil
		}
		return nil, errf(http.StatusNotFound, "UnknownOperationException", "awssim does not implement EKS %s %s", r.Method, r.URL.Path)
	}, eksContentType)
}

func (s *Sim) eksCluster(c *Cluster) map[string]any {
	return map[string]any{
		"name":      c.Name,
		"arn":       fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", s.w.region, s.w.account, c.Name),
		"createdAt": epoch(c.CreatedAt),
		"version":   c.Version,
		"endpoint":  c.Endpoint,
		"roleArn":   c.RoleARN,
		"resourcesVpcConfig": map[string]any{
			"subnetIds": nonNil(c.SubnetIDs), "securityGroupIds": nonNil(c.SecurityGroupIDs),
			"clusterSecurityGroupId": c.ClusterSGID, "vpcId": c.VpcID,
			"endpointPublicAccess": true, "endpointPrivateAccess": true, "publicAccessCidrs": []string{"0.0.0.0/0"},
		},
		"kubernetesNetworkConfig": map[string]any{"serviceIpv4Cidr": c.ServiceIPv4CIDR, "ipFamily": c.IPFamily},
		"status":                  c.Status,
		"certificateAuthority":    map[string]any{"data": c.CertificateAuthority},
		"platformVersion":         "eks.1",
		"tags":                    c.Tags,
		"accessConfig":            map[string]any{"authenticationMode": "API_AND_CONFIG_MAP"},
	}
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func (s *Sim) eksCreateCluster(body map[string]any) (any, *apiError) {
	name := jsonStr(body, "name")
	if name == "" {
		return nil, errf(http.StatusBadRequest, "InvalidParameterException", "name is required")
	}
	if _, ok := s.w.clusters.get(name); ok {
		return nil, errf(http.StatusConflict, "ResourceInUseException", "Cluster already exists with name: %s", name)
	}
	c := &Cluster{Name: name, Version: jsonStr(body, "version"), RoleARN: jsonStr(body, "roleArn")}
	if vpc, ok := body["resourcesVpcConfig"].(map[string]any); ok {
		for _, v := range anyList(vpc["subnetIds"]) {
			c.SubnetIDs = append(c.SubnetIDs, v)
		}
		for _, v := range anyList(vpc["securityGroupIds"]) {
			c.SecurityGroupIDs = append(c.SecurityGroupIDs, v)
		}
	}
	if tags, ok := body["tags"].(map[string]any); ok {
		c.Tags = map[string]string{}
		for k, v := range tags {
			c.Tags[k] = fmt.Sprint(v)
		}
	}
	fillCluster(c, s.w, s.clock.Now())
	s.w.clusters.put(name, c)
	return map[string]any{"cluster": s.eksCluster(c)}, nil
}

func anyList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return slices.Clip(out)
}
