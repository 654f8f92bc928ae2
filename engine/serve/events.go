package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// eventStream writes server-sent events, flushing each one. Its headers go
// out with the first event.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func newEventStream(w http.ResponseWriter) *eventStream {
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

// send writes v as one "data:" event.
func (e *eventStream) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return e.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

// done ends the stream the way OpenAI's does.
func (e *eventStream) done() error { return e.write([]byte("data: [DONE]\n\n")) }

func (e *eventStream) write(b []byte) error {
	if !e.started {
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no") // reverse proxies: do not buffer
		e.w.WriteHeader(http.StatusOK)
		e.started = true
	}
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("serve: writing to the client: %w", err)
	}
	if err := e.rc.Flush(); err != nil {
		return fmt.Errorf("serve: writing to the client: %w", err)
	}
	return nil
}
