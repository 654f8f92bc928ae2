package serve

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine"
)

// TestGeneratorErrors: an engine error before any text gets its own HTTP
// status, one after the stream started arrives as an error event (which
// Remote reports) and the stream has no [DONE].
func TestGeneratorErrors(t *testing.T) {
	tooLong := fmt.Errorf("engine: %w: 600 prompt tokens, 512-token context", engine.ErrPromptTooLong)
	for _, tc := range []struct {
		name   string
		gen    failing
		stream bool
		status int
		code   string
	}{
		{"prompt too long", failing{err: tooLong}, false, 400, "context_length_exceeded"},
		{"prompt too long, streamed", failing{err: tooLong}, true, 400, "context_length_exceeded"},
		{"engine failure", failing{err: errors.New("engine: out of memory")}, false, 500, ""},
	} {
		srv := startServer(t, tc.gen, testOptions())
		status, body, _ := call(t, srv, "POST", "/v1/completions", fmt.Sprintf(`{"prompt":"x","stream":%v}`, tc.stream))
		e := decodeJSON[errorEnvelope](t, body).Error
		code := ""
		if e.Code != nil {
			code = *e.Code
		}
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
	}

	srv := startServer(t, failing{pieces: []string{"half"}, err: errors.New("engine: device lost")}, testOptions())
	status, body, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"x","stream":true}`)
	evs := events(t, body)
	if status != 200 || len(evs) != 2 || !strings.Contains(evs[1], `"error"`) || !strings.Contains(evs[1], "device lost") {
		t.Errorf("error mid-stream: %d\n%s", status, body)
	}
	remote := &Remote{BaseURL: srv.URL, Model: "demo", Client: srv.Client()}
	text, _, err := collect(t.Context(), remote, engine.Request{Prompt: "x"})
	var api *APIError
	if text != "half" || !errors.As(err, &api) || !strings.Contains(api.Message, "device lost") {
		t.Errorf("Remote after an error event: %q, %v", text, err)
	}
}
