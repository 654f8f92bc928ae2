package serve

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// fixedDraft drafts every request k tokens a round. A length the engine
// chooses follows the time its passes take, and a seed draws the same
// sample only under the same draft lengths: a request repeated must draft
// alike to be answered alike.
type fixedDraft struct {
	*engine.Runner
	k int
}

func (f fixedDraft) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	req.Drafting = engine.Drafting{Max: f.k, Min: f.k}
	return f.Runner.Generate(ctx, req, emit)
}

// TestDemoPairOverHTTP serves the demo target with its draft and checks
// that what a client gets over HTTP, through the official client and
// through Remote, is exactly what the engine generates for the same
// request called directly: greedy, and sampled with a seed (both drafting
// a fixed length).
func TestDemoPairOverHTTP(t *testing.T) {
	r, err := engine.Load(t.Context(), engine.Config{
		Target:  sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"),
		Draft:   sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"),
		Context: 512,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	gen := fixedDraft{Runner: r, k: 4}
	srv := httptest.NewServer(New(gen, Options{Model: "factory-target"}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	remote := &Remote{BaseURL: srv.URL, Client: srv.Client()}

	messages := []chat.Message{{Role: "user", Content: "Write a short story about a robot."}}
	for _, s := range []engine.Sampling{{Seed: 7}, {Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 42}} {
		direct := engine.Request{Messages: messages, ChatMLFallback: true, MaxTokens: 32, Sampling: s}
		want, wantStats, err := collect(t.Context(), gen, direct)
		if err != nil || want == "" {
			t.Fatalf("direct: %q, %v", want, err)
		}

		stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
			Model:         "factory-target",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(messages[0].Content)},
			MaxTokens:     openai.Int(32),
			Temperature:   openai.Float(s.Temperature),
			TopP:          openai.Float(map[bool]float64{true: s.TopP, false: 1}[s.TopP > 0]),
			Seed:          openai.Int(int64(s.Seed)),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithJSONSet("top_k", s.TopK))
		var acc openai.ChatCompletionAccumulator
		var tandem string
		for stream.Next() {
			acc.AddChunk(stream.Current())
			if f, ok := stream.Current().JSON.ExtraFields["tandem"]; ok {
				tandem = f.Raw()
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		if got := acc.Choices[0].Message.Content; got != want {
			t.Errorf("sampling %+v: over HTTP\n%q\ndirect\n%q", s, got, want)
		}
		if int(acc.Usage.CompletionTokens) != wantStats.GeneratedTokens || int(acc.Usage.PromptTokens) != wantStats.PromptTokens {
			t.Errorf("usage %+v, direct stats %+v", acc.Usage, wantStats)
		}
		if !strings.Contains(tandem, `"drafted":`) || wantStats.Drafted == 0 {
			t.Errorf("no speculative statistics: %q (direct drafted %d)", tandem, wantStats.Drafted)
		}

		got, st, err := collect(t.Context(), remote, direct)
		if err != nil || got != want || st.Drafted != wantStats.Drafted || st.Accepted != wantStats.Accepted {
			t.Errorf("Remote: %q, %+v, %v; want %q, %+v", got, st, err, want, wantStats)
		}
	}
}

// TestDemoPairHundredConcurrent: 100 short requests at once against the
// real engine all complete, each with the answer the engine gives that
// prompt alone, and nothing is left running once the runner is closed.
func TestDemoPairHundredConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, err := engine.Load(t.Context(), engine.Config{
		Target:  sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"),
		Draft:   sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"),
		Context: 256,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const distinct = 5 // prompts; each is asked 20 times
	want := make([]string, distinct)
	for i := range want {
		req := engine.Request{Prompt: fmt.Sprintf("Chapter %d.", i+1), MaxTokens: 4}
		if want[i], _, err = collect(t.Context(), r, req); err != nil {
			t.Fatal(err)
		}
	}
	// All from loopback, one client to the server: let it have them all.
	srv := httptest.NewServer(New(r, Options{Model: "factory-target", MaxClientRequests: 100}))
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			stream := i%2 == 0
			body := fmt.Sprintf(`{"prompt":"Chapter %d.","max_tokens":4,"temperature":0,"stream":%v}`, i%distinct+1, stream)
			resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			got, aerr := answer(b, stream)
			if err != nil || aerr != nil || resp.StatusCode != 200 || got != want[i%distinct] {
				errs <- fmt.Errorf("request %d: %d %q (%v, %v), want %q", i, resp.StatusCode, got, err, aerr, want[i%distinct])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// loadDemoPair loads the demo target with its draft for a test.
func loadDemoPair(t *testing.T) *engine.Runner {
	t.Helper()
	r, err := engine.Load(t.Context(), engine.Config{
		Target:  sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"),
		Draft:   sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"),
		Context: 256,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestDemoPairEmptyPrompt: a text completion of nothing is the client's
// mistake, a 400 in OpenAI's shape (the engine refuses it with a 500's
// error), and the server goes on serving.
func TestDemoPairEmptyPrompt(t *testing.T) {
	srv := startServer(t, loadDemoPair(t), testOptions())
	for _, body := range []string{`{"prompt":""}`, `{"prompt":[""],"stream":true}`} {
		status, b, _ := call(t, srv, "POST", "/v1/completions", body)
		if e := decodeJSON[errorEnvelope](t, b).Error; status != 400 || e.Param == nil || *e.Param != "prompt" {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
	if status, b, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"Chapter 1.","max_tokens":2}`); status != 200 {
		t.Errorf("after: %d %s", status, b)
	}
}

// TestDemoPairManyStreams: 200 streamed requests at once on the demo pair,
// with the default limits, each end with a whole stream or a 429.
func TestDemoPairManyStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("200 generations on the CPU")
	}
	s := New(loadDemoPair(t), Options{Model: "factory-target"})
	counts, errs := streamLoad(t.Context(), "http://"+listening(t, s), 200,
		`{"prompt":"Tell me a fortune.","max_tokens":16,"temperature":0.8,"stream":true}`)
	for _, err := range errs {
		t.Error(err)
	}
	if counts[200] == 0 || counts[200]+counts[429] != 200 {
		t.Errorf("statuses %v", counts)
	}
}
