//go:build !headless

package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/serve"
	"github.com/tandem-run/tandem/widgets"
)

// generator is what the chat streams from now: the remote server when the
// settings say so, else the loaded local models; label says which.
func (c *chatPage) generator() (generator, string, error) {
	if r := c.m.set.Remote; r.Use {
		if r.URL == "" {
			return nil, "", errors.New("Enter the remote server's URL in the settings, or switch back to the local models.")
		}
		return &serve.Remote{BaseURL: r.URL, APIKey: r.Key}, "Remote server " + r.URL, nil
	}
	if c.local == nil {
		return nil, "", errors.New("No model loaded: press Load on the Models page (or use a remote server).")
	}
	return c.local, "Local: " + describeConfig(c.localCfg), nil
}

// sendInput sends the prompt, or resends an edited message.
func (c *chatPage) sendInput() {
	text := strings.TrimSpace(c.input.Text)
	if text == "" || c.cancel != nil || c.readOnly() {
		return
	}
	if _, _, err := c.generator(); err != nil {
		c.notice.Set(widgets.NoticeWarning, sentence(err), "")
		return
	}
	conv := c.current()
	if c.editing >= 0 && c.editing < len(conv.Messages) {
		conv.Messages = conv.Messages[:c.editing]
	}
	c.editing = -1
	c.notice.Hide()
	if len(conv.Messages) == 0 && conv.Title == newChatTitle { // not renamed yet
		conv.Title = titleFrom(text)
		c.showTitle()
	}
	conv.Messages = append(conv.Messages, Message{Role: "user", Content: text})
	c.input.SetText("")
	c.generate()
}

// regenerate answers the last user message again.
func (c *chatPage) regenerate() {
	conv := c.conv
	if c.cancel != nil || conv == nil || len(conv.Messages) == 0 || c.readOnly() {
		return
	}
	if last := len(conv.Messages) - 1; conv.Messages[last].Role == "assistant" {
		conv.Messages = conv.Messages[:last]
	}
	if len(conv.Messages) > 0 {
		c.generate()
	}
}

// edit puts user message i in the prompt; sending replaces it and drops
// everything after it.
func (c *chatPage) edit(i int) {
	if c.cancel != nil || c.conv == nil || i >= len(c.conv.Messages) || c.readOnly() {
		return
	}
	c.editing = i
	c.input.SetText(c.conv.Messages[i].Content)
	c.m.win.Canvas().Focus(c.input)
	c.notice.Set(widgets.NoticeInfo, "Editing a message: Ctrl+Enter resends it (the replies after it are replaced), Esc cancels.", "")
}

// streamChunk is what arrives between two UI updates.
type streamChunk struct {
	text  string
	stats engine.Stats
	// ttft is the time from sending to the first text (0 until then);
	// rate is decode tokens/s measured from the first text to the newest
	// (0 until a second step came).
	ttft time.Duration
	rate float64
}

// merge joins two chunks in arrival order.
func (acc streamChunk) merge(v streamChunk) streamChunk {
	return streamChunk{acc.text + v.text, v.stats, max(acc.ttft, v.ttft), cmp.Or(v.rate, acc.rate)}
}

// streamClock measures an answer as it streams: when the first text
// came, and the decode rate since. The engine's own statistics time its
// decode only once it is done, and a remote server's not at all, so the
// live numbers are the window's.
type streamClock struct {
	now          func() time.Time
	start, first time.Time
	firstTokens  int
}

// chunk is ev as a chunk, measured.
func (sc *streamClock) chunk(ev engine.Event) streamChunk {
	ch := streamChunk{text: ev.Text, stats: ev.Stats}
	t := sc.now()
	switch {
	case sc.first.IsZero() && ev.Text != "":
		sc.first, sc.firstTokens = t, ev.Stats.GeneratedTokens
		ch.ttft = max(t.Sub(sc.start), time.Nanosecond)
	case !sc.first.IsZero() && t.After(sc.first) && ev.Stats.GeneratedTokens > sc.firstTokens:
		ch.rate = float64(ev.Stats.GeneratedTokens-sc.firstTokens) / t.Sub(sc.first).Seconds()
	}
	return ch
}

// generate streams an answer to conv's messages into a new assistant
// message, updating the transcript at most once per frame.
func (c *chatPage) generate() {
	gen, label, err := c.generator()
	if err != nil {
		c.notice.Set(widgets.NoticeWarning, sentence(err), "")
		return
	}
	conv := c.conv
	req := c.request(conv)
	i := len(conv.Messages)
	conv.Messages = append(conv.Messages, Message{Role: "assistant"})
	c.showTranscript(i)
	c.save(conv)

	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.m.frames.setPhase("streaming")
	c.live = streamChunk{}
	c.meter.Set(0, "Waiting for the first token…")
	c.refresh()
	th := newThrottle(frameInterval, c.m.post, streamChunk.merge,
		func(ch streamChunk) { c.showChunk(conv, i, ch) })
	sc := &streamClock{now: c.now, start: c.now()}
	go func() {
		stats, err := gen.Generate(ctx, req, func(ev engine.Event) { th.push(sc.chunk(ev)) })
		th.flush()
		c.m.post(func() { c.finished(conv, i, label, stats, err) })
	}()
}

// request is conv as an engine request under the current settings.
func (c *chatPage) request(conv *Conversation) engine.Request {
	var msgs []chat.Message
	if conv.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: conv.System})
	}
	for _, m := range conv.Messages {
		msgs = append(msgs, chat.Message{Role: m.Role, Content: m.Content})
	}
	s := c.m.set.Chat
	return engine.Request{Messages: msgs, ChatMLFallback: true, MaxTokens: s.MaxTokens, NoDraft: !s.UseDraft,
		Sampling: s.sampling(),
		Drafting: engine.Drafting{Max: s.DraftMax, PMin: s.DraftPMin}}
}

// showChunk adds streamed text to message i of conv (main goroutine).
func (c *chatPage) showChunk(conv *Conversation, i int, ch streamChunk) {
	if i >= len(conv.Messages) {
		return
	}
	conv.Messages[i].Content += ch.text
	c.live = c.live.merge(ch)
	if conv != c.conv {
		return
	}
	c.view.UpdateMessage(i, widgets.ChatMessage{Role: "assistant", Text: conv.Messages[i].Content, Streaming: true})
	c.showMeter(c.live.stats, c.live.ttft, c.live.rate)
}

// showMeter shows an answer's numbers: the first token's wait, then the
// decode rate from the first measured step on (never a 0.0 before it).
func (c *chatPage) showMeter(s engine.Stats, ttft time.Duration, rate float64) {
	var parts []string
	if s.Drafted > 0 {
		parts = append(parts, fmt.Sprintf("acceptance %.0f%% (%d of %d drafted)", 100*s.Acceptance(), s.Accepted, s.Drafted))
	}
	switch {
	case rate > 0:
		parts = append(parts, fmt.Sprintf("%d tokens, %.1f tok/s", s.GeneratedTokens, rate))
	case s.GeneratedTokens > 0:
		parts = append(parts, plural(s.GeneratedTokens, "token"))
	}
	if ttft > 0 {
		parts = append(parts, fmt.Sprintf("first token after %.2f s", ttft.Seconds()))
	}
	if note := draftNoteOf(s); note != "" {
		parts = append(parts, note)
	}
	if len(parts) == 0 {
		parts = append(parts, "Waiting for the first token…")
	}
	c.meter.Set(s.Acceptance(), strings.Join(parts, " · "))
}

// finished ends a generation: final statistics, save, and any error.
func (c *chatPage) finished(conv *Conversation, i int, label string, s engine.Stats, err error) {
	c.cancel = nil
	c.m.frames.setPhase("idle")
	if i < len(conv.Messages) {
		msg := &conv.Messages[i]
		reason := s.FinishReason
		if errors.Is(err, context.Canceled) {
			reason, err = "cancelled", nil
		}
		msg.Stats = &MessageStats{Tokens: s.GeneratedTokens, TokS: cmp.Or(s.DecodeTokS(), c.live.rate), Drafted: s.Drafted,
			Accepted: s.Accepted, FinishReason: reason, Model: label,
			TTFTSeconds: c.live.ttft.Seconds(), PromptTokens: s.PromptTokens, PrefillTokS: s.PrefillTokS()}
		if err != nil && msg.Content == "" {
			conv.Messages = conv.Messages[:i] // nothing came: no empty answer
		}
		msg.Stats.setDraft(s)
	}
	if err != nil {
		c.notice.Set(widgets.NoticeError, "The answer failed: "+sentence(err), err.Error())
	}
	c.save(conv)
	if conv == c.conv {
		if i < len(conv.Messages) && len(c.view.Messages()) == len(conv.Messages) {
			// Only the answer changed (its cursor, statistics and buttons):
			// the messages before it are neither rendered nor refreshed.
			c.view.UpdateMessage(i, chatMessage(conv.Messages[i], false))
		} else {
			c.showTranscript(-1)
		}
		c.showMeter(s, c.live.ttft, cmp.Or(s.DecodeTokS(), c.live.rate))
	}
	c.refresh()
}

// stopGenerating cancels the generation; what came so far is kept.
func (c *chatPage) stopGenerating() {
	if c.cancel != nil {
		c.cancel()
	}
}

// showTranscript shows the open conversation; message streaming (-1:
// none) is marked as still being written.
func (c *chatPage) showTranscript(streaming int) {
	var msgs []widgets.ChatMessage
	if c.conv != nil {
		for i, m := range c.conv.Messages {
			msgs = append(msgs, chatMessage(m, i == streaming))
		}
	}
	c.view.SetMessages(msgs)
}

// chatMessage is m as the transcript shows it.
func chatMessage(m Message, streaming bool) widgets.ChatMessage {
	cm := widgets.ChatMessage{Role: m.Role, Text: m.Content, Streaming: streaming}
	if m.Stats != nil {
		cm.Stats = m.Stats.summary()
	}
	return cm
}
