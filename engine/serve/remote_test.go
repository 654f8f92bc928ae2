package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
)

// collect runs gen and returns the text it emitted.
func collect(ctx context.Context, gen Generator, req engine.Request) (string, engine.Stats, error) {
	var text strings.Builder
	st, err := gen.Generate(ctx, req, func(ev engine.Event) {
		if ev.Kind == engine.EventToken {
			text.WriteString(ev.Text)
		}
	})
	return text.String(), st, err
}

// TestRemoteRoundTrip drives a tandem server through Remote: the server's
// engine must receive exactly the request Remote was given, and Remote must
// emit the text and report the usage and speculative counts.
func TestRemoteRoundTrip(t *testing.T) {
	opt := testOptions()
	opt.APIKey = "k"
	g := &echo{}
	srv := startServer(t, g, opt)
	remote := &Remote{BaseURL: srv.URL, APIKey: "k", Client: srv.Client()}
	for _, req := range []engine.Request{
		{Messages: []chat.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "hello over there"}}, MaxTokens: 9, Stop: []string{"zz"},
			Sampling: engine.Sampling{Temperature: 0.7, TopP: 0.9, TopK: 20, MinP: 0.1, RepeatPenalty: 1.1, PresencePenalty: 0.3, FrequencyPenalty: 0.2, Seed: 1 << 63}},
		{Prompt: "plain prompt text", MaxTokens: 2, IgnoreEOS: true, Sampling: engine.Sampling{Seed: 5}},
	} {
		text, st, err := collect(t.Context(), remote, req)
		if err != nil {
			t.Fatal(err)
		}
		got := g.lastRequest()
		want := req
		want.ChatMLFallback = len(req.Messages) > 0 // the server's choice
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the engine got\n%+v\nwant\n%+v", got, want)
		}
		wantText, wantFinish, n := "hello over there", "stop", 3
		if req.Prompt != "" {
			wantText, wantFinish, n = "plain prompt ", "length", 2
		}
		if text != wantText || st.FinishReason != wantFinish || st.GeneratedTokens != n || st.PromptTokens != 6 || st.Drafted != 2*n || st.Accepted != n || st.Steps != n {
			t.Errorf("text %q, stats %+v", text, st)
		}
	}
	if ids, err := remote.Models(t.Context()); err != nil || !reflect.DeepEqual(ids, []string{"demo"}) {
		t.Errorf("models %q, %v", ids, err)
	}

	remote.APIKey = "wrong"
	_, _, err := collect(t.Context(), remote, engine.Request{Prompt: "x"})
	var api *APIError
	if !errors.As(err, &api) || api.Status != http.StatusUnauthorized || api.Code != "invalid_api_key" {
		t.Errorf("wrong key: %v", err)
	}
}

// TestRemoteCancel cancels a remote generation after its first token: it
// must stop with ctx's error, and the server must free its runner.
func TestRemoteCancel(t *testing.T) {
	_, srv, g := blockedServer(t, testOptions())
	remote := &Remote{BaseURL: srv.URL + "/v1", Model: "demo", Client: srv.Client()}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { g.gate <- struct{}{} }() // one token, then the gate stays shut
	var tokens int
	st, err := remote.Generate(ctx, engine.Request{Prompt: "a b c d"}, func(ev engine.Event) {
		tokens++
		cancel()
	})
	if !errors.Is(err, context.Canceled) || st.FinishReason != "cancelled" || tokens != 1 {
		t.Fatalf("after cancel: %v, %+v, %d tokens", err, st, tokens)
	}
	next := send(t.Context(), srv, "next", false)
	if got := <-g.started; got != "a b c d" {
		t.Fatalf("first started %q", got)
	}
	if got := <-g.started; got != "next" {
		t.Fatalf("then %q started", got)
	}
	close(g.gate)
	if r := <-next; r.status != 200 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
}

// TestRemoteStreams reads streams as other servers write them: comments,
// event names, data split over lines, no usage, an error event, a stream
// cut short.
func TestRemoteStreams(t *testing.T) {
	for _, tc := range []struct {
		name, stream, text string
		tokens             int
		err                string
	}{
		{"vllm-like", ": ping\n\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\r\n\r\n" +
			"event: message\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"},\n" +
			"data: \"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", "Hi there", 2, ""},
		{"error event", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}\n\n", "a", 1, "out of memory"},
		{"cut short", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", "a", 1, "before its finish reason"},
		{"not JSON", "data: {nope\n\n", "", 0, "bad event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, tc.stream)
			}))
			defer srv.Close()
			remote := &Remote{BaseURL: srv.URL + "/v1", Model: "m", Client: srv.Client()}
			text, st, err := collect(t.Context(), remote, engine.Request{Messages: []chat.Message{{Role: "user", Content: "x"}}})
			if text != tc.text || st.GeneratedTokens != tc.tokens {
				t.Errorf("text %q, %d tokens", text, st.GeneratedTokens)
			}
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err %v, want %q", err, tc.err)
			}
		})
	}
}

func TestRemoteEndpoint(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"http://h:1", "http://h:1/v1/models"},
		{"http://h:1/", "http://h:1/v1/models"},
		{"http://h:1/v1/", "http://h:1/v1/models"},
		{" https://h/api/v1 ", "https://h/api/v1/models"},
		{"ftp://h/v1", ""},
		{"h:1/v1", ""},
		{"", ""},
	} {
		got, err := (&Remote{BaseURL: tc.base}).endpoint("models")
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("%q: %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
}
