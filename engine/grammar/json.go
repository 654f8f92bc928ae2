package grammar

// The JSON building blocks every schema grammar shares, defined once per
// Rules under these names.
const (
	jsonWS     = "json-ws"
	jsonValue  = "json-value"
	jsonObject = "json-object"
	jsonArray  = "json-array"
	jsonString = "json-string"
	jsonChar   = "json-char"
	jsonNumber = "json-number"
	jsonInt    = "json-integer"
	jsonBool   = "json-boolean"
	jsonNull   = "json-null"
)

// Bounds that keep a small model from running on forever where JSON has
// no bound of its own: whitespace between tokens (no blank lines), and
// the digits of a number's parts.
const (
	maxIndent      = 32
	maxIntDigits   = 19
	maxFracDigits  = 20
	maxExponDigits = 3
)

func digits(lo rune) Expr { return Class(false, RuneRange{lo, '9'}) }

// defineJSON adds the shared JSON rules to r unless they are there.
func defineJSON(r *Rules) {
	if r.Has(jsonValue) {
		return
	}
	hex := Class(false, RuneRange{'0', '9'}, RuneRange{'a', 'f'}, RuneRange{'A', 'F'})
	hexNoD := Class(false, RuneRange{'0', '9'}, RuneRange{'a', 'c'}, RuneRange{'e', 'f'}, RuneRange{'A', 'C'}, RuneRange{'E', 'F'})
	defs := []struct {
		name string
		e    Expr
	}{
		// One space, or one newline and an indent: enough for compact and
		// pretty-printed JSON, never an endless run of blank lines.
		{jsonWS, Opt(Alt(Lit(" "), Seq(Lit("\n"), Repeat(Class(false, RuneRange{' ', ' '}, RuneRange{'\t', '\t'}), 0, maxIndent))))},
		// A character of a string: anything but a quote, a backslash or a
		// control character, or an escape. \u escapes of surrogates are
		// left out: an unpaired one is not text, and a pair stands for
		// one character that can as well be written as itself.
		{jsonChar, Alt(
			Class(true, RuneRange{'"', '"'}, RuneRange{'\\', '\\'}, RuneRange{0, 0x1F}),
			Seq(Lit("\\"), Alt(
				Class(false, RuneRange{'"', '"'}, RuneRange{'\\', '\\'}, RuneRange{'/', '/'},
					RuneRange{'b', 'b'}, RuneRange{'f', 'f'}, RuneRange{'n', 'n'}, RuneRange{'r', 'r'}, RuneRange{'t', 't'}),
				Seq(Lit("u"), Alt(Seq(hexNoD, hex, hex, hex), Seq(Class(false, RuneRange{'d', 'd'}, RuneRange{'D', 'D'}), Class(false, RuneRange{'0', '7'}), hex, hex))),
			)),
		)},
		{jsonString, Seq(Lit(`"`), Star(Ref(jsonChar)), Lit(`"`))},
		{jsonInt, Seq(Opt(Lit("-")), Alt(Lit("0"), Seq(digits('1'), Repeat(digits('0'), 0, maxIntDigits-1))))},
		{jsonNumber, Seq(Ref(jsonInt),
			Opt(Seq(Lit("."), Repeat(digits('0'), 1, maxFracDigits))),
			Opt(Seq(Class(false, RuneRange{'e', 'e'}, RuneRange{'E', 'E'}), Opt(Class(false, RuneRange{'+', '+'}, RuneRange{'-', '-'})), Repeat(digits('0'), 1, maxExponDigits))))},
		{jsonBool, Alt(Lit("true"), Lit("false"))},
		{jsonNull, Lit("null")},
		{jsonObject, objectOf(Ref(jsonString), Ref(jsonValue))},
		{jsonArray, arrayOf(Ref(jsonValue), 0, -1)},
		{jsonValue, Alt(Ref(jsonObject), Ref(jsonArray), Ref(jsonString), Ref(jsonNumber), Ref(jsonBool), Ref(jsonNull))},
	}
	for _, d := range defs {
		_ = r.Define(d.name, d.e) // the names are new: Has(jsonValue) was false
	}
}

// objectOf is an object of any number of members with keys matching key
// and values matching value.
func objectOf(key, value Expr) Expr {
	ws := Ref(jsonWS)
	member := Seq(key, ws, Lit(":"), ws, value, ws)
	return Seq(Lit("{"), ws, Opt(Seq(member, Star(Seq(Lit(","), ws, member)))), Lit("}"))
}

// arrayOf is an array of min to max (max < 0: any number of) items.
func arrayOf(item Expr, min, max int) Expr {
	ws := Ref(jsonWS)
	one := Seq(item, ws)
	more := Seq(Lit(","), ws, item, ws)
	var body Expr
	switch {
	case max == 0:
		body = Seq()
	case min == 0:
		rest := -1
		if max > 0 {
			rest = max - 1
		}
		body = Opt(Seq(one, Repeat(more, 0, rest)))
	default:
		rest := -1
		if max > 0 {
			rest = max - 1
		}
		body = Seq(one, Repeat(more, min-1, rest))
	}
	return Seq(Lit("["), ws, body, Lit("]"))
}

// JSONObject is the grammar of response_format json_object: any JSON
// object.
func JSONObject() (*Grammar, error) {
	var r Rules
	defineJSON(&r)
	if err := r.Define("root", Ref(jsonObject)); err != nil {
		return nil, err
	}
	return r.Compile("root")
}
