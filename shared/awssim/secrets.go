package awssim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Secrets Manager (awsJson1_1, X-Amz-Target: secretsmanager.<Action>): enough
// for a kubeadm bootstrap token kept as a secret and read at launch time.

type smHandler func(s *Sim, body map[string]any) (any, *apiError)

var smActions = map[string]smHandler{
	"CreateSecret":   (*Sim).smCreateSecret,
	"GetSecretValue": (*Sim).smGetSecretValue,
	"PutSecretValue": (*Sim).smPutSecretValue,
}

func (s *Sim) serveSecretsManager(w http.ResponseWriter, r *http.Request, raw []byte) {
	target := r.Header.Get("X-Amz-Target")
	action := strings.TrimPrefix(target, "secretsmanager.")
	var body map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			writeJSONError(w, http.StatusBadRequest, "SerializationException", "awssim: request body is not a JSON object: "+err.Error(), "")
			return
		}
	}
	s.serveJSONCall(w, r, "secretsmanager", action, body, func() (any, *apiError) {
		h, ok := smActions[action]
		if !ok {
			return nil, errf(http.StatusBadRequest, "UnknownOperationException", "awssim does not implement Secrets Manager action %q (X-Amz-Target %q)", action, target)
		}
		return h(s, body)
	}, jsonContentType)
}

// fillSecret completes the generated fields of a secret.
func (s *Sim) fillSecret(sec *Secret, now time.Time) {
	if sec.ARN == "" {
		// Secrets Manager appends six random characters to the name in the ARN.
		sec.ARN = fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", s.w.region, s.w.account, sec.Name, s.w.hexID("x", 6)[2:])
	}
	if sec.VersionID == "" {
		sec.VersionID = s.w.uuid()
	}
	if sec.Created.IsZero() {
		sec.Created = now
	}
}

// findSecret resolves a SecretId: a name, a full ARN, or an ARN without its random suffix.
func (s *Sim) findSecret(id string) (*Secret, *apiError) {
	if sec, ok := s.w.secrets.get(id); ok {
		return sec, nil
	}
	for _, sec := range s.w.secrets.list() {
		if sec.ARN == id || strings.HasPrefix(sec.ARN, id+"-") && strings.HasPrefix(id, "arn:") {
			return sec, nil
		}
	}
	return nil, errf(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
}

func (s *Sim) smCreateSecret(body map[string]any) (any, *apiError) {
	name := jsonStr(body, "Name")
	if name == "" {
		return nil, errf(http.StatusBadRequest, "InvalidParameterException", "Name is required")
	}
	if _, ok := s.w.secrets.get(name); ok {
		return nil, errf(http.StatusBadRequest, "ResourceExistsException", "The operation failed because the secret %s already exists.", name)
	}
	sec := &Secret{Name: name, Value: jsonStr(body, "SecretString"), Description: jsonStr(body, "Description")}
	s.fillSecret(sec, s.clock.Now())
	s.w.secrets.put(name, sec)
	return map[string]any{"ARN": sec.ARN, "Name": sec.Name, "VersionId": sec.VersionID}, nil
}

func (s *Sim) smGetSecretValue(body map[string]any) (any, *apiError) {
	sec, err := s.findSecret(jsonStr(body, "SecretId"))
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"ARN": sec.ARN, "Name": sec.Name, "VersionId": sec.VersionID, "SecretString": sec.Value,
		"VersionStages": []string{"AWSCURRENT"}, "CreatedDate": epoch(sec.Created),
	}, nil
}

func (s *Sim) smPutSecretValue(body map[string]any) (any, *apiError) {
	sec, err := s.findSecret(jsonStr(body, "SecretId"))
	if err != nil {
		return nil, err
	}
	sec.Value = jsonStr(body, "SecretString")
	sec.VersionID = s.w.uuid()
	sec.Created = s.clock.Now()
	return map[string]any{"ARN": sec.ARN, "Name": sec.Name, "VersionId": sec.VersionID, "VersionStages": []string{"AWSCURRENT"}}, nil
}
