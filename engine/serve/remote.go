package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
)

// Remote is a Generator that runs on an OpenAI-compatible server: another
// tandem serve, or vLLM, SGLang or llama.cpp serving a model across
// machines. Messages go to /chat/completions (the server applies its chat
// template), a bare Prompt to /completions; both stream.
type Remote struct {
	// BaseURL is the API root, as OpenAI clients take it:
	// "http://host:8000/v1". A URL with no path gets "/v1".
	BaseURL string
	APIKey  string // sent as a bearer token when set
	Model   string // the model to ask for; "" = the first /models lists
	// Client makes the requests; nil = http.DefaultClient.
	Client *http.Client
	// Now is the clock for the prefill and decode times; nil = time.Now.
	Now func() time.Time
}

// maxEventBytes bounds one server-sent event line from a remote server.
const maxEventBytes = 4 << 20

// Models lists the ids the server serves.
func (r *Remote) Models(ctx context.Context) ([]string, error) {
	resp, err := r.do(ctx, http.MethodGet, "models", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list modelList
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxEventBytes)).Decode(&list); err != nil {
		return nil, fmt.Errorf("serve: remote models: %w", err)
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	return ids, nil
}

// Generate streams one completion from the server, emitting an EventToken
// per piece of text (with no token ids: the server sends none). Stats count
// the server's usage when it reports it and the pieces otherwise; the
// speculative counts come through when the server is tandem.
func (r *Remote) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	if req.Constraint != nil || len(req.Tools) > 0 {
		// A constraint is compiled against this machine's vocabulary, and
		// the calls would come back as tool_calls, which Events do not
		// carry: neither can be forwarded faithfully.
		return engine.Stats{}, errors.New("serve: remote: a constrained request or one with tools cannot be forwarded; send response_format or tools to the server itself")
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	model := r.Model
	if model == "" {
		ids, err := r.Models(ctx)
		if err != nil {
			return engine.Stats{}, err
		}
		if len(ids) == 0 {
			return engine.Stats{}, errors.New("serve: remote serves no model")
		}
		model = ids[0]
	}
	path, body := remoteBody(model, req)
	b, err := json.Marshal(body)
	if err != nil {
		return engine.Stats{}, fmt.Errorf("serve: remote: %w", err)
	}
	start := now()
	resp, err := r.do(ctx, http.MethodPost, path, b)
	if err != nil {
		return engine.Stats{FinishReason: cancelledIf(ctx)}, err
	}
	defer resp.Body.Close()

	var st engine.Stats
	var firstAt time.Time
	err = readEvents(resp.Body, func(data []byte) error {
		var c remoteChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("serve: remote sent a bad event: %w", err)
		}
		if c.Error != nil {
			return c.Error.apiError(0)
		}
		for _, ch := range c.Choices {
			if text := ch.Text + ch.Delta.Content; text != "" {
				if firstAt.IsZero() {
					firstAt = now()
				}
				st.GeneratedTokens++ // a piece per token, until usage says better
				st.Steps++
				emit(engine.Event{Kind: engine.EventToken, Text: text, Stats: st})
			}
			if ch.FinishReason != nil {
				st.FinishReason = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			st.PromptTokens, st.GeneratedTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
		if c.Tandem != nil {
			st.Drafted, st.Accepted, st.Steps = c.Tandem.Drafted, c.Tandem.Accepted, c.Tandem.Steps
		}
		return nil
	})
	end := now()
	if firstAt.IsZero() {
		firstAt = end
	}
	st.PrefillSeconds, st.DecodeSeconds = firstAt.Sub(start).Seconds(), end.Sub(firstAt).Seconds()
	if ctx.Err() != nil {
		st.FinishReason = "cancelled"
		return st, fmt.Errorf("serve: remote: %w", ctx.Err())
	}
	if err != nil {
		return st, err
	}
	if st.FinishReason == "" {
		return st, errors.New("serve: remote stream ended before its finish reason")
	}
	return st, nil
}

// remoteBody is the request body for req, and the path it goes to.
// Sampling fields at their engine default ("off") are left out, so that a
// server that lacks the extension fields (top_k, min_p, ...) is not sent
// them needlessly.
func remoteBody(model string, req engine.Request) (string, map[string]any) {
	s := req.Sampling
	body := map[string]any{
		"model":          model,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"temperature":    s.Temperature,
		"seed":           int64(s.Seed),
	}
	path := "completions"
	if len(req.Messages) > 0 {
		path = "chat/completions"
		body["messages"] = req.Messages
	} else {
		body["prompt"] = req.Prompt
	}
	if req.MaxTokens > 0 {
		body["max_tokens"] = req.MaxTokens
	}
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	if req.IgnoreEOS {
		body["ignore_eos"] = true
	}
	if s.TopP > 0 && s.TopP < 1 {
		body["top_p"] = s.TopP
	}
	if s.TopK > 0 {
		body["top_k"] = s.TopK
	}
	if s.MinP > 0 {
		body["min_p"] = s.MinP
	}
	if s.RepeatPenalty > 0 && s.RepeatPenalty != 1 {
		body["repetition_penalty"] = s.RepeatPenalty // vLLM's and SGLang's name
	}
	if s.PresencePenalty != 0 {
		body["presence_penalty"] = s.PresencePenalty
	}
	if s.FrequencyPenalty != 0 {
		body["frequency_penalty"] = s.FrequencyPenalty
	}
	return path, body
}

// remoteChunk is what Remote reads of a stream chunk, chat or text; other
// fields servers send are ignored.
type remoteChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage  *usage       `json:"usage"`
	Tandem *tandemStats `json:"tandem"`
	Error  *errorBody   `json:"error"`
}

// do sends one request and returns a 2xx response; any other status becomes
// an *APIError from the body.
func (r *Remote) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u, err := r.endpoint(path)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("serve: remote: %w", err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", "application/json, text/event-stream")
	if r.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+r.APIKey)
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("serve: remote: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env struct {
		Error *errorBody `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error != nil {
		return nil, env.Error.apiError(resp.StatusCode)
	}
	return nil, &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
}

// endpoint joins BaseURL and path.
func (r *Remote) endpoint(path string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(r.BaseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("serve: remote URL %q: want http://host:port/v1", r.BaseURL)
	}
	base := strings.TrimSuffix(u.Path, "/")
	if base == "" {
		base = "/v1"
	}
	u.Path = base + "/" + path
	return u.String(), nil
}

// readEvents calls fn with the data of each server-sent event until the
// stream's [DONE] or its end.
func readEvents(body io.Reader, fn func(data []byte) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 { // an empty line ends an event
			if len(data) == 0 {
				continue
			}
			if bytes.Equal(data, []byte("[DONE]")) {
				return nil
			}
			if err := fn(data); err != nil {
				return err
			}
			data = data[:0]
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" { // comments (":...") and event:, id:, retry:
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if len(data) > 0 {
			data = append(data, '\n')
		}
		data = append(data, value...)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("serve: remote stream: %w", err)
	}
	if len(data) > 0 && !bytes.Equal(data, []byte("[DONE]")) {
		return fn(data)
	}
	return nil
}

func cancelledIf(ctx context.Context) string {
	if ctx.Err() != nil {
		return "cancelled"
	}
	return ""
}
