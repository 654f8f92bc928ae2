package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The "type" values of OpenAI's error objects that this API uses.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeNotFound       = "not_found_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
)

// APIError is an error in OpenAI's shape,
// {"error": {"message", "type", "param", "code"}}: the server answers with
// it and Remote returns it for a non-2xx answer or an error event mid-stream.
type APIError struct {
	Status  int    // HTTP status; 0 for an error sent inside a stream
	Type    string // e.g. "invalid_request_error"
	Param   string // the request field at fault, if any
	Code    string // e.g. "invalid_api_key", if any
	Message string
}

func (e *APIError) Error() string {
	s := "serve: "
	if e.Status != 0 {
		s += fmt.Sprintf("%d %s: ", e.Status, http.StatusText(e.Status))
	}
	s += e.Message
	if e.Param != "" {
		s += " (param " + e.Param + ")"
	}
	return s
}

// errorEnvelope is the wire form of APIError; empty param and code are null,
// as OpenAI sends them.
type errorEnvelope struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *APIError) envelope() errorEnvelope {
	return errorEnvelope{errorBody{Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code)}}
}

func (b errorBody) apiError(status int) *APIError {
	e := &APIError{Status: status, Type: b.Type, Message: b.Message}
	if b.Param != nil {
		e.Param = *b.Param
	}
	if b.Code != nil {
		e.Code = *b.Code
	}
	return e
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 about the request field param ("" for none).
func badRequest(param, format string, a ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Message: fmt.Sprintf(format, a...)}
}

// refuse answers e before reading the body, and closes the connection
// after it if there is one: net/http would otherwise read (and wait for) up
// to 256 KiB of it before sending the answer.
func refuse(w http.ResponseWriter, r *http.Request, e *APIError) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeError(w, e)
}

// writeError answers with e as JSON.
func writeError(w http.ResponseWriter, e *APIError) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tandem"`)
	}
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e.envelope())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is one of this package's wire structs,
		// which always marshal; say so rather than send half a body.
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"serve: encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
