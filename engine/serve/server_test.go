package serve

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine"
)

// testOptions fixes the clock and the randomness.
func testOptions() Options {
	var n atomic.Uint64
	return Options{
		Model: "demo",
		Now:   func() time.Time { return time.Unix(1_700_000_000, 0) },
		Rand:  func() uint64 { return n.Add(1) },
	}
}

func startServer(t *testing.T, gen Generator, opt Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(gen, opt))
	t.Cleanup(srv.Close)
	return srv
}

// call sends a request and returns the status and the body.
func call(t *testing.T, srv *httptest.Server, method, path, body string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, b)
	}
	return v
}

// events splits an SSE body into its data payloads, failing on anything but
// "data: ..." lines each followed by an empty line.
func events(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			t.Fatalf("stream line %q is not a data line\n%s", sc.Text(), body)
		}
		out = append(out, data)
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("event %q is not followed by an empty line\n%s", data, body)
		}
	}
	return out
}

// streamed is a chunk as the tests read it: chat or text.
type streamed struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Index        int       `json:"index"`
		Text         *string   `json:"text"`
		Delta        chatDelta `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	} `json:"choices"`
	Usage  *usage       `json:"usage"`
	Tandem *tandemStats `json:"tandem"`
}

func TestChatCompletion(t *testing.T) {
	srv := startServer(t, &echo{}, testOptions())
	status, body, hdr := call(t, srv, "POST", "/v1/chat/completions",
		`{"model":"anything","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"one two three"}]}`)
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, type %q: %s", status, hdr.Get("Content-Type"), body)
	}
	got := decodeJSON[struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int             `json:"index"`
			Message      wholeMessage    `json:"message"`
			FinishReason string          `json:"finish_reason"`
			Logprobs     json.RawMessage `json:"logprobs"`
		} `json:"choices"`
		Usage  usage       `json:"usage"`
		Tandem tandemStats `json:"tandem"`
	}](t, body)
	if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Object != "chat.completion" || got.Created != 1_700_000_000 || got.Model != "demo" {
		t.Errorf("head: %+v", got)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("%d choices", len(got.Choices))
	}
	c := got.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content == nil || *c.Message.Content != "one two three" || c.Message.ToolCalls != nil ||
		c.FinishReason != "stop" || string(c.Logprobs) != "null" {
		t.Errorf("choice: %+v", c)
	}
	if got.Usage != (usage{PromptTokens: 6, CompletionTokens: 3, TotalTokens: 9}) {
		t.Errorf("usage: %+v", got.Usage)
	}
	want := tandemStats{Drafted: 6, Accepted: 3, Acceptance: 0.5, Steps: 3, PrefillTokS: 12, DecodeTokS: 4}
	if got.Tandem != want {
		t.Errorf("tandem: %+v, want %+v", got.Tandem, want)
	}
}

func TestTextCompletion(t *testing.T) {
	srv := startServer(t, &echo{}, testOptions())
	for _, tc := range []struct {
		body, text, finish string
	}{
		{`{"prompt":"a b c","max_tokens":2}`, "a b ", "length"},
		{`{"prompt":["a b c"],"max_tokens":10}`, "a b c", "stop"},
		{`{"prompt":"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18"}`, "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 ", "length"}, // OpenAI's default of 16
	} {
		status, body, _ := call(t, srv, "POST", "/v1/completions", tc.body)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", tc.body, status, body)
		}
		got := decodeJSON[struct {
			Object  string `json:"object"`
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}](t, body)
		if got.Object != "text_completion" || len(got.Choices) != 1 || got.Choices[0].Text != tc.text || got.Choices[0].FinishReason != tc.finish {
			t.Errorf("%s: %s", tc.body, body)
		}
	}
}

func TestChatStream(t *testing.T) {
	srv := startServer(t, &echo{}, testOptions())
	for _, usageAsked := range []bool{false, true} {
		req := `{"messages":[{"role":"user","content":"x y z"}],"stream":true}`
		if usageAsked {
			req = `{"messages":[{"role":"user","content":"x y z"}],"stream":true,"stream_options":{"include_usage":true}}`
		}
		status, body, hdr := call(t, srv, "POST", "/v1/chat/completions", req)
		if status != 200 || hdr.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, type %q: %s", status, hdr.Get("Content-Type"), body)
		}
		evs := events(t, body)
		if evs[len(evs)-1] != "[DONE]" {
			t.Fatalf("stream does not end with [DONE]:\n%s", body)
		}
		var text strings.Builder
		var finish []string
		var usages, tandems int
		for i, e := range evs[:len(evs)-1] {
			c := decodeJSON[streamed](t, []byte(e))
			if c.Object != "chat.completion.chunk" || c.Model != "demo" || c.ID != decodeJSON[streamed](t, []byte(evs[0])).ID {
				t.Errorf("chunk %d head: %s", i, e)
			}
			if c.Usage != nil {
				usages++
				if len(c.Choices) != 0 || *c.Usage != (usage{6, 3, 9}) || i != len(evs)-2 {
					t.Errorf("usage chunk %d: %s", i, e)
				}
				continue
			}
			if len(c.Choices) != 1 {
				t.Fatalf("chunk %d has %d choices", i, len(c.Choices))
			}
			if (i == 0) != (c.Choices[0].Delta.Role == "assistant") {
				t.Errorf("chunk %d role %q", i, c.Choices[0].Delta.Role)
			}
			text.WriteString(c.Choices[0].Delta.Content)
			if f := c.Choices[0].FinishReason; f != nil {
				finish = append(finish, *f)
			}
			if c.Tandem != nil {
				tandems++
				if c.Tandem.Drafted != 6 || c.Tandem.Accepted != 3 || c.Choices[0].FinishReason == nil {
					t.Errorf("tandem chunk %d: %s", i, e)
				}
			}
		}
		if text.String() != "x y z" || len(finish) != 1 || finish[0] != "stop" || tandems != 1 {
			t.Errorf("text %q, finish %q, %d tandem chunks:\n%s", text.String(), finish, tandems, body)
		}
		if want := map[bool]int{false: 0, true: 1}[usageAsked]; usages != want {
			t.Errorf("include_usage %v: %d usage chunks", usageAsked, usages)
		}
	}
}

func TestTextStream(t *testing.T) {
	srv := startServer(t, &echo{}, testOptions())
	status, body, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"p q r","max_tokens":2,"stream":true}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	evs := events(t, body)
	var text strings.Builder
	for _, e := range evs[:len(evs)-1] {
		c := decodeJSON[streamed](t, []byte(e))
		if c.Object != "text_completion" || c.Choices[0].Text == nil {
			t.Errorf("chunk: %s", e)
		}
		text.WriteString(*c.Choices[0].Text)
	}
	last := decodeJSON[streamed](t, []byte(evs[len(evs)-2]))
	if text.String() != "p q " || *last.Choices[0].FinishReason != "length" || evs[len(evs)-1] != "[DONE]" {
		t.Errorf("text %q:\n%s", text.String(), body)
	}
}

// TestStopStrings checks that stop strings end the text, also when a stop
// string arrives split over tokens, and that no part of one is streamed.
func TestStopStrings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces pieces
		stop   string
		text   string
		finish string
	}{
		{"split over tokens", pieces{"ab", "cE", "N", "Dxyz", "more"}, `"END"`, "abc", "stop"},
		{"inside one token", pieces{"abcENDxyz", "more"}, `["END"]`, "abc", "stop"},
		{"earliest of several", pieces{"a", "bYYc", "XX"}, `["XX","YY"]`, "ab", "stop"},
		{"prefix that does not complete", pieces{"aE", "N", "x"}, `"END"`, "aENx", "stop"},
		{"prefix at the very end", pieces{"aE", "N"}, `"END"`, "aEN", "stop"},
		{"multibyte", pieces{"né", "→x"}, `"é→"`, "n", "stop"},
		{"multibyte prefix", pieces{"né", "e", "→", "f"}, `"é→"`, "née→f", "stop"},
		{"empty stop is none", pieces{"a", "b"}, `""`, "ab", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, tc.pieces, testOptions())
			status, body, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"x","stream":true,"max_tokens":99,"stop":`+tc.stop+`}`)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			evs := events(t, body)
			var text strings.Builder
			for _, e := range evs[:len(evs)-1] {
				text.WriteString(*decodeJSON[streamed](t, []byte(e)).Choices[0].Text)
			}
			if text.String() != tc.text {
				t.Errorf("streamed %q, want %q", text.String(), tc.text)
			}
			_, body, _ = call(t, srv, "POST", "/v1/completions", `{"prompt":"x","max_tokens":99,"stop":`+tc.stop+`}`)
			whole := decodeJSON[struct {
				Choices []struct{ Text, FinishReason string } `json:"choices"`
			}](t, body)
			if whole.Choices[0].Text != tc.text {
				t.Errorf("whole %q, want %q", whole.Choices[0].Text, tc.text)
			}
		})
	}
}

func TestRequestFields(t *testing.T) {
	for _, tc := range []struct {
		path, body string
		want       engine.Request
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"developer","content":"d"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null,"refusal":null}],"seed":7}`,
			engine.Request{ChatMLFallback: true, Sampling: engine.Sampling{Temperature: 1, Seed: 7}}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":5,"max_completion_tokens":9,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"repeat_penalty":1.1,"presence_penalty":0.5,"frequency_penalty":-0.5,"seed":-1,"stop":["x","y"],"n":1,"user":"u","tool_choice":"none","response_format":{"type":"text"}}`,
			engine.Request{ChatMLFallback: true, MaxTokens: 9, Stop: []string{"x", "y"}, Sampling: engine.Sampling{Temperature: 0.5, TopP: 0.9, TopK: 40, MinP: 0.05, RepeatPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: -0.5, Seed: 1<<64 - 1}}},
		{"/v1/completions", `{"prompt":"p","max_tokens":3,"top_p":0,"top_k":-1,"repetition_penalty":1.2,"ignore_eos":true,"seed":3}`,
			engine.Request{Prompt: "p", MaxTokens: 3, IgnoreEOS: true, Sampling: engine.Sampling{RepeatPenalty: 1.2, Seed: 3}}},
		{"/v1/completions", `{"prompt":"p","temperature":0}`,
			engine.Request{Prompt: "p", MaxTokens: 16, Sampling: engine.Sampling{Seed: 1}}}, // the seed comes from Options.Rand
	} {
		g := &echo{}
		srv := startServer(t, g, testOptions())
		if status, body, _ := call(t, srv, "POST", tc.path, tc.body); status != 200 {
			t.Fatalf("%s: status %d: %s", tc.body, status, body)
		}
		got := g.lastRequest()
		msgs := got.Messages
		got.Messages = nil
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(tc.want)
		if string(gb) != string(wb) {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, gb, wb)
		}
		if strings.Contains(tc.body, "developer") {
			mb, _ := json.Marshal(msgs)
			if want := `[{"role":"system","content":"d"},{"role":"user","content":"ab"},{"role":"assistant","content":""}]`; string(mb) != want {
				t.Errorf("messages %s, want %s", mb, want)
			}
		}
	}
}

func TestBadRequests(t *testing.T) {
	opt := testOptions()
	opt.MaxBodyBytes = 1 << 10
	srv := startServer(t, &echo{}, opt)
	const chat = "/v1/chat/completions"
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		method, path, body string
		status             int
		param, says        string
	}{
		{"POST", chat, `{` + user + `,"temprature":1}`, 400, "temprature", "unknown field"},
		{"POST", chat, `{"messages":[{"role":"user","content":"hi","nmae":"x"}]}`, 400, "nmae", "unknown field"},
		{"POST", chat, `{` + user + `,`, 400, "", "not valid JSON"},
		{"POST", chat, `{` + user + ` "x"}`, 400, "", "not valid JSON"},
		{"POST", chat, `{` + user + `} {}`, 400, "", "nothing after it"},
		{"POST", chat, ``, 400, "", "empty"},
		{"POST", chat, `[1]`, 400, "", "JSON object"},
		{"POST", chat, `{` + user + `,"temperature":"hot"}`, 400, "temperature", "must be a number"},
		{"POST", chat, `{` + user + `,"temperature":2.5}`, 400, "temperature", "between 0 and 2"},
		{"POST", chat, `{` + user + `,"n":2}`, 400, "n", "n must be 1"},
		{"POST", chat, `{` + user + `,"max_tokens":0}`, 400, "max_tokens", "at least 1"},
		{"POST", chat, `{` + user + `,"stop":[1]}`, 400, "stop", "string or an array"},
		{"POST", chat, `{` + user + `,"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, 400, "stop", "at most 16"},
		{"POST", chat, `{` + user + `,"tools":[{"type":"function"}]}`, 400, "tools[0].function.name", "function name"},
		{"POST", chat, `{` + user + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, 400, "tools", "not supported by this server's generator"},
		{"POST", chat, `{` + user + `,"tool_choice":"sometimes"}`, 400, "tool_choice", "not one of"},
		{"POST", chat, `{` + user + `,"tool_choice":"required"}`, 400, "tool_choice", "needs tools"},
		{"POST", chat, `{` + user + `,"response_format":{"type":"xml"}}`, 400, "response_format", "not one of"},
		{"POST", chat, `{` + user + `,"response_format":{"type":"json_object"},"grammar":"root ::= \"a\""}`, 400, "grammar", "not both"},
		{"POST", chat, `{"messages":[{"role":"user","content":"x","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, 400, "messages[0].tool_calls", "only assistant"},
		{"POST", chat, `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}]}`, 400, "messages[0].tool_calls[0].function.name", "name its function"},
		{"POST", chat, `{` + user + `,"logprobs":true}`, 400, "logprobs", "not supported"},
		{"POST", chat, `{` + user + `,"response_format":{"type":"json_object"}}`, 400, "response_format", "not supported by this server's generator"},
		{"POST", chat, `{` + user + `,"repeat_penalty":1.1,"repetition_penalty":1.2}`, 400, "repetition_penalty", "not both"},
		{"POST", chat, `{` + user + `,"logit_bias":{"1":5}}`, 400, "logit_bias", "not supported"},
		{"POST", chat, `{` + user + `,"ignore_eos":true}`, 400, "ignore_eos", "needs max_tokens"},
		{"POST", chat, `{"messages":[]}`, 400, "messages", "at least one"},
		{"POST", chat, `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages[0].tool_call_id", "which call"},
		{"POST", chat, `{"messages":[{"role":"function","content":"x"}]}`, 400, "messages[0].role", "not supported"},
		{"POST", chat, `{"messages":[{"content":"x"}]}`, 400, "messages[0].role", "no role"},
		{"POST", chat, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "content", "image_url"},
		{"POST", chat, `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`, 413, "", "larger than"},
		{"POST", "/v1/completions", `{"prompt":[1,2,3]}`, 400, "prompt", "token ids"},
		{"POST", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", "one prompt per request"},
		{"POST", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "required"},
		{"POST", "/v1/completions", `{"prompt":""}`, 400, "prompt", "empty"},
		{"POST", "/v1/completions", `{"prompt":[""]}`, 400, "prompt", "empty"},
		{"POST", "/v1/completions", `{"prompt":"a","echo":true}`, 400, "echo", "not supported"},
		{"POST", "/v1/completions", `{"prompt":"a","suffix":"b"}`, 400, "suffix", "not supported"},
		{"POST", "/v1/completions", `{"prompt":"a","messages":[]}`, 400, "messages", "unknown field"},
		{"GET", chat, ``, 405, "", "takes POST"},
		{"POST", "/v1/models", ``, 405, "", "takes GET"},
		{"GET", "/v1/embeddings", ``, 404, "", "no route"},
		{"GET", "/v1/models/other", ``, 404, "model", "not served here"},
	} {
		status, body, hdr := call(t, srv, tc.method, tc.path, tc.body)
		if status != tc.status {
			t.Errorf("%s %s %.60s: status %d, want %d: %s", tc.method, tc.path, tc.body, status, tc.status, body)
			continue
		}
		e := decodeJSON[errorEnvelope](t, body).Error
		param := ""
		if e.Param != nil {
			param = *e.Param
		}
		if param != tc.param || !strings.Contains(e.Message, tc.says) || e.Type == "" {
			t.Errorf("%s %.60s: error %s, want param %q saying %q", tc.path, tc.body, body, tc.param, tc.says)
		}
		if status == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}

func TestModels(t *testing.T) {
	srv := startServer(t, &echo{}, testOptions())
	_, body, _ := call(t, srv, "GET", "/v1/models", "")
	list := decodeJSON[modelList](t, body)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0] != (modelCard{"demo", "model", 1_700_000_000, "tandem"}) {
		t.Errorf("models: %s", body)
	}
	status, body, _ := call(t, srv, "GET", "/v1/models/demo", "")
	if status != 200 || decodeJSON[modelCard](t, body).ID != "demo" {
		t.Errorf("model: %d %s", status, body)
	}
}

func TestAPIKey(t *testing.T) {
	opt := testOptions()
	opt.APIKey = "sekrit"
	srv := startServer(t, &echo{}, opt)
	for _, tc := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer sekri", 401}, {"Basic sekrit", 401}, {"Bearer sekrit", 200}, {"bearer sekrit", 200}} {
		status, body, hdr := call(t, srv, "GET", "/v1/models", "", "Authorization", tc.auth)
		if status != tc.status {
			t.Errorf("Authorization %q: status %d, want %d", tc.auth, status, tc.status)
		}
		if status == 401 && (decodeJSON[errorEnvelope](t, body).Error.Type != typeAuthentication || hdr.Get("WWW-Authenticate") == "") {
			t.Errorf("401 body %s, WWW-Authenticate %q", body, hdr.Get("WWW-Authenticate"))
		}
	}
	if status, _, _ := call(t, srv, "GET", "/health", ""); status != 200 {
		t.Errorf("health needs no key, got %d", status)
	}
}

// TestOversizedBodies: a body over the limit is a 413, whether its length
// is announced or it arrives chunked, and whatever it holds.
func TestOversizedBodies(t *testing.T) {
	opt := testOptions()
	opt.MaxBodyBytes = 1 << 10
	srv := startServer(t, &echo{}, opt)
	big := `{"prompt":"` + strings.Repeat("a", 2000) + `"}`
	for _, tc := range []struct {
		name string
		body io.Reader
	}{
		{"announced", strings.NewReader(big)},
		{"announced, not JSON", strings.NewReader(strings.Repeat("a", 2000))},
		{"chunked", io.MultiReader(strings.NewReader(big))},
	} {
		resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json", tc.body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "larger than") {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, b)
		}
	}
}
