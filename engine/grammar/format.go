package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ResponseFormat compiles an OpenAI response_format: nil for "text" (or
// none), any JSON object for "json_object", the schema's values for
// "json_schema" ({"name", "schema", "strict"}; strict or not, the output
// follows the schema). Errors wrap ErrSchema, ErrUnsupported or ErrEmpty
// and say which part of the field is at fault.
func ResponseFormat(raw json.RawMessage) (*Grammar, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("grammar: response_format is not an object with a type: %w", ErrSchema)
	}
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return JSONObject()
	case "json_schema":
		if f.JSONSchema == nil || len(bytes.TrimSpace(f.JSONSchema.Schema)) == 0 {
			return nil, fmt.Errorf("grammar: response_format.json_schema.schema is required: %w", ErrSchema)
		}
		g, err := FromSchema(f.JSONSchema.Schema)
		if err != nil {
			return nil, fmt.Errorf("response_format.json_schema.schema: %w", err)
		}
		return g, nil
	}
	return nil, fmt.Errorf("grammar: response_format type %q is not one of text, json_object, json_schema: %w", f.Type, ErrSchema)
}
