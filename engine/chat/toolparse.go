package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Delta is one piece of an answer being parsed for tool calls: content
// text, or part of a call. A call's first delta has its Name (and
// Arguments ""), later ones more of its Arguments text, in the order of
// OpenAI's streamed tool_calls deltas; the server gives each Index an id.
type Delta struct {
	Content   string
	Call      bool
	Index     int
	Name      string
	Arguments string
}

// ToolParser reads a model's tool calls out of its text as it is made, so
// a server can stream them as they come. Text outside calls is content.
// The zero value is not usable; make one with NewToolParser.
type ToolParser struct {
	syntax ToolSyntax
	open   string // the tag that starts a call ("" for JSONSyntax: a { at the start)
	close  string // the tag that ends one ("" for JSONSyntax: the object's end)

	pending string // text not yet given out
	inCall  bool
	call    callScan
	calls   []ToolCall
	started bool // some text was seen (JSONSyntax: calls only at the start)

	progressed bool // the last scan switched between content and a call
}

// NewToolParser reads calls in syntax s (NoToolSyntax: everything is
// content).
func NewToolParser(s ToolSyntax) *ToolParser {
	p := &ToolParser{syntax: s}
	if s == HermesSyntax {
		p.open, p.close = "<tool_call>", "</tool_call>"
	}
	return p
}

// Feed takes the next piece of the model's text and returns the deltas it
// completes. Text that may begin a call is held back until it is clear.
func (p *ToolParser) Feed(text string) []Delta {
	p.pending += text
	return p.scan(false)
}

// Flush ends the text: whatever is held back is given out, a call left
// open is completed if its JSON is whole, or else given back as content.
func (p *ToolParser) Flush() []Delta { return p.scan(true) }

// scan reads pending text until it can go no further, switching between
// content and calls.
func (p *ToolParser) scan(final bool) []Delta {
	var out []Delta
	for {
		p.progressed = false
		if p.inCall {
			out = p.scanCall(out, final)
		} else {
			out = p.scanContent(out, final)
		}
		if !p.progressed {
			return out
		}
	}
}

// Calls are the complete calls parsed so far, arguments as JSON text.
func (p *ToolParser) Calls() []ToolCall { return p.calls }

func content(out []Delta, s string) []Delta {
	if s == "" {
		return out
	}
	if n := len(out); n > 0 && !out[n-1].Call {
		out[n-1].Content += s
		return out
	}
	return append(out, Delta{Content: s})
}

// scanContent gives out content up to the next call's start.
func (p *ToolParser) scanContent(out []Delta, final bool) []Delta {
	switch p.syntax {
	case HermesSyntax:
		if len(p.calls) > 0 {
			// Between and after calls, line breaks are layout, not content.
			p.pending = strings.TrimLeft(p.pending, " \t\r\n")
		}
		if i := strings.Index(p.pending, p.open); i >= 0 {
			out = content(out, p.pending[:i])
			p.pending = p.pending[i+len(p.open):]
			p.beginCall()
			return out
		}
		keep := 0
		if !final {
			keep = partialSuffix(p.pending, p.open)
		}
		out = content(out, p.pending[:len(p.pending)-keep])
		p.pending = p.pending[len(p.pending)-keep:]
		return out
	case JSONSyntax:
		if !p.started {
			t := strings.TrimLeft(p.pending, " \t\r\n")
			t = strings.TrimPrefix(t, "<|python_tag|>")
			if t == "" || strings.HasPrefix("<|python_tag|>", t) && !final {
				return out // not clear yet
			}
			p.started = true
			if strings.HasPrefix(t, "{") {
				p.pending = t
				p.beginCall()
				return out
			}
		}
		// After a call, a ; or another object starts the next one.
		if len(p.calls) > 0 {
			t := strings.TrimLeft(p.pending, " \t\r\n;")
			if strings.HasPrefix(t, "{") {
				p.pending = t
				p.beginCall()
				return out
			}
			if t == "" && !final {
				return out
			}
		}
	}
	out = content(out, p.pending)
	p.pending = ""
	return out
}

// partialSuffix is the length of the longest end of s that begins tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// callScan is the state of the call being read: its JSON text so far and
// how far the streaming of its arguments has got.
type callScan struct {
	text      string // the call's text after the open tag
	named     bool   // the head, {"name": ..., "arguments": was read
	announced bool   // the start delta (with the name) was given out
	argsAt    int    // where the arguments value starts in text; -1 until found
	argsSent  int    // bytes of the arguments value given out
	argsEnd   int    // where it ends; -1 until found
	fallback  bool   // not "name" then "arguments": parse it whole at the end
	depth     int    // scanning the arguments value
	inString  bool
	escaped   bool
	scanned   int // bytes of the arguments value scanned
	objectEnd int // JSONSyntax: where the call's object ends; -1 until found
}

func (p *ToolParser) beginCall() {
	p.inCall = true
	p.progressed = true
	p.call = callScan{argsAt: -1, argsEnd: -1, objectEnd: -1}
}

// scanCall reads more of the current call; it ends the call at its close
// tag (or, for JSONSyntax, where its object closes).
func (p *ToolParser) scanCall(out []Delta, final bool) []Delta {
	c := &p.call
	c.text += p.pending
	p.pending = ""
	end := -1 // where the call's text ends
	rest := ""
	if p.close != "" {
		if i := strings.Index(c.text, p.close); i >= 0 {
			end, rest = i, c.text[i+len(p.close):]
		}
	}
	if !c.named && !c.fallback {
		c.parseHead(p.syntax)
	}
	index := len(p.calls)
	if c.named {
		if !c.announced {
			out = append(out, Delta{Call: true, Index: index, Name: c.name()})
			c.announced = true
		}
		out = c.streamArgs(out, index, end)
	}
	if p.close == "" && c.argsEnd >= 0 && c.objectEnd < 0 {
		// JSONSyntax: the object closes after the arguments.
		if j := strings.IndexByte(c.text[c.argsEnd:], '}'); j >= 0 {
			c.objectEnd = c.argsEnd + j + 1
			end, rest = c.objectEnd, c.text[c.objectEnd:]
		}
	}
	if p.close == "" && c.fallback && end < 0 {
		if n := objectLength(c.text); n > 0 {
			end, rest = n, c.text[n:]
		}
	}
	if end < 0 && !final {
		return out
	}
	if end < 0 {
		end = len(c.text)
	}
	body := c.text[:end]
	call, ok := wholeCall(body)
	switch {
	case c.named:
		// Already streamed: the arguments given out stand.
		args := ""
		if c.argsAt >= 0 {
			stop := end
			if c.argsEnd >= 0 {
				stop = c.argsEnd
			}
			args = strings.TrimSpace(c.text[c.argsAt:min(stop, len(c.text))])
		}
		p.calls = append(p.calls, ToolCall{Type: "function", Function: FunctionCall{Name: c.name(), Arguments: args}})
	case ok:
		out = append(out, Delta{Call: true, Index: index, Name: call.Function.Name},
			Delta{Call: true, Index: index, Arguments: call.Function.Arguments})
		p.calls = append(p.calls, call)
	default:
		// Not a call after all: give its text back as content.
		out = content(out, p.open+body+p.closeIfSeen(end < len(c.text) || rest != ""))
	}
	p.inCall = false
	p.pending = rest
	p.progressed = true
	return out
}

func (p *ToolParser) closeIfSeen(seen bool) string {
	if seen {
		return p.close
	}
	return ""
}

// head parsing: {"name": "NAME", "arguments": VALUE ...} with any spacing.
type headScan struct {
	s   string
	pos int
}

func (h *headScan) space() {
	for h.pos < len(h.s) && strings.IndexByte(" \t\r\n", h.s[h.pos]) >= 0 {
		h.pos++
	}
}

// str reads a JSON string; ok false when it is not whole yet or not one.
func (h *headScan) str() (string, bool, bool) {
	if h.pos >= len(h.s) {
		return "", false, true
	}
	if h.s[h.pos] != '"' {
		return "", false, false
	}
	for i := h.pos + 1; i < len(h.s); i++ {
		switch h.s[i] {
		case '\\':
			i++
		case '"':
			var v string
			if json.Unmarshal([]byte(h.s[h.pos:i+1]), &v) != nil {
				return "", false, false
			}
			h.pos = i + 1
			return v, true, true
		}
	}
	return "", false, true
}

func (h *headScan) lit(c byte) (bool, bool) {
	h.space()
	if h.pos >= len(h.s) {
		return false, true
	}
	if h.s[h.pos] != c {
		return false, false
	}
	h.pos++
	return true, true
}

func (c *callScan) parseHead(s ToolSyntax) {
	h := &headScan{s: c.text}
	steps := []func() (bool, bool){
		func() (bool, bool) { return h.lit('{') },
		func() (bool, bool) {
			h.space()
			k, ok, maybe := h.str()
			return ok && k == "name", maybe && (!ok || k == "name")
		},
		func() (bool, bool) { return h.lit(':') },
		func() (bool, bool) {
			h.space()
			_, ok, maybe := h.str()
			return ok, maybe
		},
		func() (bool, bool) { return h.lit(',') },
		func() (bool, bool) {
			h.space()
			k, ok, maybe := h.str()
			want := "arguments"
			if s == JSONSyntax {
				want = "parameters"
			}
			good := k == want || k == "arguments"
			return ok && good, maybe && (!ok || good)
		},
		func() (bool, bool) { return h.lit(':') },
	}
	for _, step := range steps {
		ok, maybe := step()
		if !ok {
			if !maybe {
				c.fallback = true
			}
			return
		}
	}
	h.space()
	if h.pos >= len(h.s) {
		return
	}
	c.named = true
	c.argsAt = h.pos
}

// name is the function name of a named call (parseHead found it).
func (c *callScan) name() string {
	h := &headScan{s: c.text}
	h.lit('{')
	h.space()
	h.str()
	h.lit(':')
	h.space()
	v, _, _ := h.str()
	return v
}

// streamArgs gives out the arguments value as far as it has come, and
// finds its end (depth back to zero after a whole value).
func (c *callScan) streamArgs(out []Delta, index int, end int) []Delta {
	limit := len(c.text)
	if end >= 0 {
		limit = end
	}
	if c.argsEnd < 0 {
		v := c.text[c.argsAt:limit]
		for c.scanned < len(v) {
			ch := v[c.scanned]
			c.scanned++
			switch {
			case c.escaped:
				c.escaped = false
			case c.inString:
				if ch == '\\' {
					c.escaped = true
				} else if ch == '"' {
					c.inString = false
					if c.depth == 0 {
						c.argsEnd = c.argsAt + c.scanned
					}
				}
			case ch == '"':
				c.inString = true
			case ch == '{' || ch == '[':
				c.depth++
			case ch == '}' || ch == ']':
				c.depth--
				if c.depth == 0 {
					c.argsEnd = c.argsAt + c.scanned
				}
			}
			if c.argsEnd >= 0 {
				break
			}
		}
	}
	stop := limit
	if c.argsEnd >= 0 {
		stop = c.argsEnd
	}
	if from := c.argsAt + c.argsSent; stop > from {
		out = append(out, Delta{Call: true, Index: index, Arguments: c.text[from:stop]})
		c.argsSent = stop - c.argsAt
	}
	return out
}

// wholeCall parses a call's whole JSON text.
func wholeCall(body string) (ToolCall, bool) {
	var v struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	d := json.NewDecoder(strings.NewReader(body))
	if err := d.Decode(&v); err != nil || v.Name == "" {
		return ToolCall{}, false
	}
	var rest bytes.Buffer
	if _, err := rest.ReadFrom(d.Buffered()); err == nil && strings.TrimSpace(rest.String()) != "" {
		return ToolCall{}, false
	}
	args := v.Arguments
	if len(args) == 0 {
		args = v.Parameters
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return ToolCall{Type: "function", Function: FunctionCall{Name: v.Name, Arguments: string(args)}}, true
}

// objectLength is the length of the JSON object s starts with (after
// spaces), or 0 when it is not whole yet.
func objectLength(s string) int {
	d := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if d.Decode(&raw) != nil {
		return 0
	}
	return int(d.InputOffset())
}
