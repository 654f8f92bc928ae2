// Package schematest holds what the engine's and the server's tests of
// structured output share: a JSON schema with a required field of each
// kind, and a check of output against a schema by the JSON-schema library
// alone, apart from the grammar the engine compiles from the same schema.
package schematest

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Person has a required field of each kind the server's acceptance names:
// string, number, enum and array. The bounds keep the demo model's output
// (it was never trained on JSON) within the token budget.
const Person = `{"type": "object",
 "properties": {
  "name": {"type": "string", "maxLength": 24},
  "score": {"type": "number"},
  "mood": {"enum": ["happy", "sad", "calm"]},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
 "required": ["name", "score", "mood", "tags"],
 "additionalProperties": false}`

// Validator compiles schema and returns a check of a text against it (nil:
// the text is JSON the schema accepts).
func Validator(tb testing.TB, schema string) func(text string) error {
	tb.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		tb.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		tb.Fatal(err)
	}
	return func(text string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
}
