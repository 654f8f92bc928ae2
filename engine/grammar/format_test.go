package grammar

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestResponseFormat(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		grammar bool
		want    error
		says    string
	}{
		{``, false, nil, ""},
		{`{"type":"text"}`, false, nil, ""},
		{`{"type":"json_object"}`, true, nil, ""},
		{`{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}}}`, true, nil, ""},
		{`{"type":"json_schema","json_schema":{"name":"p"}}`, false, ErrSchema, "schema is required"},
		{`{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"a":{"not":{}}}}}}`, false, ErrUnsupported, `"not"`},
		{`{"type":"yaml"}`, false, ErrSchema, `"yaml"`},
		{`[1]`, false, ErrSchema, "not an object"},
	} {
		g, err := ResponseFormat(json.RawMessage(tc.raw))
		if (g != nil) != tc.grammar || !errors.Is(err, tc.want) || (tc.want != nil && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s: grammar %v, error %v", tc.raw, g != nil, err)
		}
	}
	// json_object makes objects only.
	g, err := ResponseFormat(json.RawMessage(`{"type":"json_object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !matches(t, g, `{"a": [1, "x"]}`) || matches(t, g, `[1]`) || matches(t, g, `"x"`) {
		t.Error("json_object grammar accepts the wrong values")
	}
}
