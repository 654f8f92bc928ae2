package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
)

// endpoint is what tells chat and text completions apart on the wire.
type endpoint struct {
	chat   bool
	object string // of a whole response; a stream chunk's is object+".chunk" for chat
	prefix string // of the response id
	// tools is the syntax the answer's tool calls are read in
	// (chat.NoToolSyntax: the answer is all content).
	tools chat.ToolSyntax
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var body chatRequest
	if e := decodeBody(w, r, s.opt.MaxBodyBytes, s.opt.BodyTimeout, &body); e != nil {
		writeError(w, e)
		return
	}
	req, e := body.request(s.opt.Rand)
	if e != nil {
		writeError(w, e)
		return
	}
	syntax, e := s.structure(&body.sampleParams, &body, &req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.complete(w, r, endpoint{chat: true, object: "chat.completion", prefix: "chatcmpl-", tools: syntax}, req, &body.sampleParams)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var body completionRequest
	if e := decodeBody(w, r, s.opt.MaxBodyBytes, s.opt.BodyTimeout, &body); e != nil {
		writeError(w, e)
		return
	}
	req, e := body.request(s.opt.Rand)
	if e == nil {
		_, e = s.structure(&body.sampleParams, nil, &req)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	s.complete(w, r, endpoint{object: "text_completion", prefix: "cmpl-"}, req, &body.sampleParams)
}

// complete runs req and answers whole or as a stream.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, ep endpoint, req engine.Request, p *sampleParams) {
	start := s.opt.Now()
	head := completion{ID: fmt.Sprintf("%s%016x%08x", ep.prefix, s.opt.Rand(), uint32(s.opt.Rand())),
		Object: ep.object, Created: start.Unix(), Model: s.opt.Model}
	var (
		stats  engine.Stats
		finish string
		err    error
	)
	if p.Stream {
		stats, finish, err = s.stream(r.Context(), w, ep, head, req, p.StreamOptions != nil && p.StreamOptions.IncludeUsage)
	} else {
		stats, finish, err = s.whole(r.Context(), w, ep, head, req)
	}
	outcome := finish
	switch {
	case err != nil && r.Context().Err() != nil:
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	}
	s.metrics.observe(ep, stats, outcome)
	s.logRequest(r, head.ID, s.opt.Now().Sub(start).Seconds(), stats, finish, err)
}

// whole answers with one JSON body once the generation has ended.
func (s *Server) whole(ctx context.Context, w http.ResponseWriter, ep endpoint, resp completion, req engine.Request) (engine.Stats, string, error) {
	var text strings.Builder
	stats, finish, err := s.generate(ctx, req, func(t string) error {
		text.WriteString(t)
		return nil
	})
	if err != nil {
		s.fail(ctx, w, err)
		return stats, finish, err
	}
	c := choice{FinishReason: &finish}
	if ep.chat {
		content := text.String()
		c.Message = &wholeMessage{Role: "assistant", Content: &content}
		if ep.tools != chat.NoToolSyntax {
			tc := newToolCalls(ep.tools, s.opt.Rand)
			var sb strings.Builder
			for _, d := range append(tc.p.Feed(content), tc.p.Flush()...) {
				sb.WriteString(d.Content)
			}
			content = sb.String()
			if calls := tc.calls(); len(calls) > 0 {
				c.Message.ToolCalls = calls
				if strings.TrimSpace(content) == "" {
					c.Message.Content = nil
				}
				if finish == "stop" {
					finish = "tool_calls"
				}
			}
		}
	} else {
		t := text.String()
		c.Text = &t
	}
	resp.Choices = []choice{c}
	resp.Usage, resp.Tandem = usageOf(stats), tandemOf(stats)
	writeJSON(w, http.StatusOK, resp)
	return stats, finish, nil
}

// stream answers with server-sent events: one chunk per piece of text, a
// last chunk with the finish reason and the speculative statistics, the
// usage chunk when asked for, and [DONE]. The stream starts with the first
// text, so an error before it (a full queue, a prompt the engine refuses)
// still gets its own HTTP status.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, ep endpoint, head completion, req engine.Request, withUsage bool) (engine.Stats, string, error) {
	if ep.chat {
		head.Object += ".chunk"
	}
	out := newEventStream(w)
	first := true
	chunk := func(c choice) completion {
		ch := head
		ch.Choices = []choice{c}
		return ch
	}
	sendDelta := func(d chatDelta) error {
		if first {
			d.Role = "assistant"
		}
		first = false
		return out.send(chunk(choice{Delta: &d}))
	}
	var tc *toolCalls
	if ep.tools != chat.NoToolSyntax {
		tc = newToolCalls(ep.tools, s.opt.Rand)
	}
	sendAll := func(ds []chat.Delta) error {
		for _, d := range tc.deltas(ds) {
			if err := sendDelta(d); err != nil {
				return err
			}
		}
		return nil
	}
	send := func(text string) error {
		switch {
		case tc != nil:
			return sendAll(tc.p.Feed(text))
		case ep.chat:
			return sendDelta(chatDelta{Content: text})
		}
		first = false
		return out.send(chunk(choice{Text: &text}))
	}
	stats, finish, err := s.generate(ctx, req, send)
	if err == nil && tc != nil {
		err = sendAll(tc.p.Flush())
		if len(tc.p.Calls()) > 0 && finish == "stop" {
			finish = "tool_calls"
		}
	}
	if err == nil && first && ep.chat {
		err = sendDelta(chatDelta{}) // every chat stream names the role
	}
	if err != nil {
		if !out.started {
			s.fail(ctx, w, err)
		} else if ctx.Err() == nil {
			out.send(s.apiError(err).envelope())
		}
		return stats, finish, err
	}
	last := choice{FinishReason: &finish}
	if ep.chat {
		last.Delta = &chatDelta{}
	} else {
		empty := ""
		last.Text = &empty
	}
	lastChunk := chunk(last)
	lastChunk.Tandem = tandemOf(stats)
	err = out.send(lastChunk)
	if err == nil && withUsage {
		u := head
		u.Choices, u.Usage = []choice{}, usageOf(stats)
		err = out.send(u)
	}
	if err == nil {
		err = out.done()
	}
	return stats, finish, err
}

// generate runs req once the queue gives it the runner, passing its text
// through the stop strings to onText. It returns the finish reason as
// OpenAI names it: "stop" or "length".
func (s *Server) generate(ctx context.Context, req engine.Request, onText func(string) error) (engine.Stats, string, error) {
	arrived := s.opt.Now()
	release, err := s.queue.acquire(ctx)
	if err != nil {
		return engine.Stats{}, "", err
	}
	defer release()
	s.metrics.running.Inc()
	var held int64 // this request's tokens in the KV cache
	defer func() {
		s.metrics.running.Dec()
		s.metrics.kvTokens.Add(-held)
	}()
	onText = s.timeFirstText(arrived, onText)

	// The engine stops at req.Stop itself; filtering here too keeps the
	// promise for any Generator, and cancelling genCtx is how a stop string
	// or a client that cannot be written to ends the generation.
	genCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := stopFilter{stops: req.Stop}
	var (
		hit  bool
		werr error
	)
	stats, err := s.gen.Generate(genCtx, req, func(ev engine.Event) {
		n := int64(ev.Stats.PromptTokens + ev.Stats.GeneratedTokens)
		s.metrics.kvTokens.Add(n - held)
		held = n
		if ev.Kind != engine.EventToken || hit || werr != nil {
			return
		}
		text, h := stop.push(ev.Text)
		if text != "" {
			werr = onText(text)
		}
		hit = h
		if hit || werr != nil {
			cancel()
		}
	})
	switch {
	case werr != nil:
		return stats, "", werr
	case hit:
		return stats, "stop", nil
	case ctx.Err() != nil:
		return stats, "", ctx.Err()
	case err != nil:
		return stats, "", err
	case stats.FinishReason == "cancelled":
		return stats, "", errors.New("serve: the generation was cancelled")
	}
	if rest := stop.flush(); rest != "" {
		if err := onText(rest); err != nil {
			return stats, "", err
		}
	}
	if stats.FinishReason == "length" {
		return stats, "length", nil
	}
	return stats, "stop", nil
}

// timeFirstText wraps onText to record the time from arrived to the first
// text.
func (s *Server) timeFirstText(arrived time.Time, onText func(string) error) func(string) error {
	timed := false
	return func(t string) error {
		if !timed && t != "" {
			timed = true
			s.metrics.firstText(s.opt.Now().Sub(arrived))
		}
		return onText(t)
	}
}

// fail answers err before any of the response was written; a client that
// has gone gets nothing.
func (s *Server) fail(ctx context.Context, w http.ResponseWriter, err error) {
	if ctx.Err() != nil {
		return
	}
	writeError(w, s.apiError(err))
}

func (s *Server) apiError(err error) *APIError {
	var api *APIError
	switch {
	case errors.As(err, &api):
		return api
	case errors.Is(err, engine.ErrPromptTooLong):
		return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "context_length_exceeded", Message: err.Error()}
	case errors.Is(err, chat.ErrNoTools):
		return badRequest("tools", "%s", err.Error())
	case errors.Is(err, errQueueFull):
		return &APIError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full",
			Message: fmt.Sprintf("%d requests are already waiting for the model; retry later", s.opt.MaxQueue)}
	}
	return &APIError{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()}
}

func usageOf(st engine.Stats) *usage {
	return &usage{PromptTokens: st.PromptTokens, CompletionTokens: st.GeneratedTokens, TotalTokens: st.PromptTokens + st.GeneratedTokens}
}

func tandemOf(st engine.Stats) *tandemStats {
	return &tandemStats{Drafted: st.Drafted, Accepted: st.Accepted, Acceptance: st.Acceptance(), Steps: st.Steps,
		PrefillTokS: st.PrefillTokS(), DecodeTokS: st.DecodeTokS()}
}

func (s *Server) logRequest(r *http.Request, id string, secs float64, st engine.Stats, finish string, err error) {
	attrs := []any{"path", r.URL.Path, "id", id, "seconds", secs,
		"prompt_tokens", st.PromptTokens, "tokens", st.GeneratedTokens, "tok_s", st.DecodeTokS()}
	if st.Drafted > 0 {
		attrs = append(attrs, "acceptance", st.Acceptance())
	}
	switch {
	case err == nil:
		s.opt.Log.Info("completion", append(attrs, "finish", finish)...)
	case r.Context().Err() != nil:
		s.opt.Log.Info("client went away", attrs...)
	default:
		s.opt.Log.Warn("completion failed", append(attrs, "err", err)...)
	}
}
