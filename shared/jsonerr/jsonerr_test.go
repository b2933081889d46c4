package jsonerr

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type offering struct {
	Zone string `json:"zone"`
}

type script struct {
	ICE      []offering        `json:"ice"`
	Count    int32             `json:"count"`
	Rate     float64           `json:"rate"`
	Deny     []string          `json:"deny"`
	Tags     map[string]string `json:"tags"`
	Start    time.Time         `json:"start"`
	Nested   struct{ On bool } `json:"nested"`
	Region   *string           `json:"region"`
	Children []struct {
		Size uint8 `json:"size"`
	} `json:"children"`
}

func TestDescribeNamesFieldsAndShapesNotGoTypes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"ice": {"zone": "a"}}`, "ice: want a list, got an object"},
		{`{"count": "3"}`, "count: want a whole number from -2147483648 to 2147483647, got a string"},
		{`{"count": 1.5}`, "count: want a whole number from -2147483648 to 2147483647, got the number 1.5"},
		{`{"count": 99999999999}`, "count: want a whole number from -2147483648 to 2147483647, got the number 99999999999"},
		{`{"rate": true}`, "rate: want a number, got true or false"},
		{`{"deny": "x"}`, "deny: want a list, got a string"},
		{`{"tags": []}`, "tags: want an object (a mapping), got a list"},
		{`{"start": 5}`, `want a time such as "2026-12-01T09:00:00Z"`}, // time.Time names no field
		{`{"start": "monday"}`, `invalid time "monday": want a time such as "2026-12-01T09:00:00Z"`},
		{`{"nested": {"On": "yes"}}`, "nested.On: want true or false, got a string"},
		{`{"region": 5}`, "region: want a string, got a number"},
		{`{"children": [{"size": 300}]}`, "children.size: want a whole number from 0 to 255, got the number 300"},
		{`[]`, "the document: want an object, got a list"},
		{"{\n  \"ice\": [\n    {\"zone\": }\n  ]\n}", "invalid JSON at line 3, column 14: invalid character '}' looking for beginning of value"},
		{``, "empty document"},
		{`{"ice": [`, "invalid JSON: unexpected end of input"},
	} {
		var s script
		err := Describe([]byte(tc.in), json.Unmarshal([]byte(tc.in), &s))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.in, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "jsonerr.") || strings.Contains(err.Error(), "struct {") || strings.Contains(err.Error(), "Go ")) {
			t.Errorf("%s: %v names a Go type", tc.in, err)
		}
	}
	dec := json.NewDecoder(strings.NewReader(`{"icee": []}`))
	dec.DisallowUnknownFields()
	var s script
	if err := Describe(nil, dec.Decode(&s)); err == nil || err.Error() != `unknown field "icee"` {
		t.Errorf("unknown field: %v", err)
	}
}
