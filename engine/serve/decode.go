package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// decodeBody reads r's body, at most limit bytes, into v: one JSON object,
// no field v does not list. The body must arrive within timeout; the
// deadline is lifted once it has, so that the connection can report a
// client going away during the generation. After an error the connection
// is closed: what is left of the body is not worth waiting for.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, v any) *APIError {
	e := readBody(w, r, limit, timeout, v)
	if e != nil {
		w.Header().Set("Connection", "close")
	}
	return e
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, v any) *APIError {
	if r.ContentLength > limit { // known too large: refuse before reading
		return decodeError(&http.MaxBytesError{Limit: limit}, limit, timeout)
	}
	rc := http.NewResponseController(w)
	// ErrNotSupported (a ResponseWriter that is not a connection's) leaves
	// the body without a deadline: nothing of its own to wait for.
	rc.SetReadDeadline(time.Now().Add(timeout))
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, limit, timeout)
	}
	if _, err := dec.Token(); err != io.EOF {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) || errors.Is(err, os.ErrDeadlineExceeded) {
			return decodeError(err, limit, timeout)
		}
		return badRequest("", "the body must be one JSON object with nothing after it")
	}
	rc.SetReadDeadline(time.Time{})
	return nil
}

func decodeError(err error, limit int64, timeout time.Duration) *APIError {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
		api      *APIError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &APIError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest,
			Message: fmt.Sprintf("the body is larger than the server's limit of %d bytes", limit)}
	case errors.As(err, &api):
		return api
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &APIError{Status: http.StatusRequestTimeout, Type: typeInvalidRequest,
			Message: fmt.Sprintf("the body did not arrive within %s", timeout)}
	case errors.Is(err, io.EOF):
		return badRequest("", "the body is empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the body is not valid JSON: it ends inside a value")
	case errors.As(err, &syntax):
		return badRequest("", "the body is not valid JSON: %v (at byte %d)", err, syntax.Offset)
	case errors.As(err, &typ):
		// The path names the embedded struct by its Go name; a client knows
		// only the JSON fields.
		typ.Field = strings.TrimPrefix(typ.Field, "sampleParams.")
		if typ.Field == "" {
			return badRequest("", "the body must be a JSON object, not %s", typ.Value)
		}
		return badRequest(typ.Field, "%s must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	}
	// encoding/json reports an unknown field only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badRequest(name, "unknown field %q", name)
	}
	return badRequest("", "the body could not be read: %v", err)
}

// jsonKind names a Go kind the way a JSON user would.
func jsonKind(kind string) string {
	switch kind {
	case "int", "int64", "uint64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "a " + kind
}

// stopList is "stop": a string or an array of strings; empty strings are
// dropped (clients send "" to mean none).
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = nil
		if one != "" {
			*s = stopList{one}
		}
		return nil
	}
	var many []*string
	if err := json.Unmarshal(b, &many); err != nil {
		return badRequest("stop", "stop must be a string or an array of strings")
	}
	*s = nil
	for _, p := range many {
		if p == nil {
			return badRequest("stop", "stop must be a string or an array of strings")
		}
		if *p != "" {
			*s = append(*s, *p)
		}
	}
	return nil
}

// messageContent is a message's "content": a string, null, or an array of
// content parts of which only text parts can be used by a text model.
type messageContent string

func (c *messageContent) UnmarshalJSON(b []byte) error {
	var one *string
	if err := json.Unmarshal(b, &one); err == nil {
		*c = ""
		if one != nil {
			*c = messageContent(*one)
		}
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return badRequest("content", "a message's content must be a string or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return badRequest("content", "content part of type %q is not supported: this server runs a text model", p.Type)
		}
		sb.WriteString(*p.Text)
	}
	*c = messageContent(sb.String())
	return nil
}
