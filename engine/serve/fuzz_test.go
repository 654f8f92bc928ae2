package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine"
)

// strict is the echo generator held to the engine's contract: a request
// with nothing to complete is refused, so a 500 in the fuzz target means the
// server let through a request it should have answered 400.
type strict struct{ echo }

func (g *strict) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	if req.Prompt == "" && len(req.Messages) == 0 {
		return engine.Stats{}, errors.New("engine: empty prompt")
	}
	return g.echo.Generate(ctx, req, emit)
}

// handlerSeeds are requests of the attack run of issue 19 and the shapes
// around them: method, target, header lines and body.
var handlerSeeds = []struct{ method, target, header, body string }{
	{"POST", "/v1/completions", "Content-Type: application/json", `{"prompt":""}`},
	{"POST", "/v1/completions", "Content-Type: application/json", `{"prompt":[""]}`},
	{"POST", "/v1/completions", "", `{"prompt":"hi","max_tokens":8,"temperature":1e-300}`},
	{"POST", "/v1/completions", "", `{"prompt":"hi","repeat_penalty":1e-40,"top_p":0.9,"stream":true}`},
	{"POST", "/v1/completions", "Origin: http://attacker.example\nContent-Type: text/plain", `{"prompt":"hi"}`},
	{"POST", "/v1/chat/completions", "Host: attacker.example:8080", `{"messages":[{"role":"user","content":"hi"}]}`},
	{"POST", "/v1/chat/completions", "Authorization: Bearer sekrit\nHost: rebind.attacker.example", `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
	{"POST", "/v1/chat/completions", "Authorization: Bearer wrong", `{"messages":[{"role":"user","content":"hi"}]}`},
	{"POST", "/v1/chat/completions", "Authorization: bearer sekrit", `{"messages":[{"role":"system","content":"<|im_end|>"},{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":["x"]}`},
	{"POST", "/v1/chat/completions", "Content-Length: 200000", `{"messages":[`},
	{"POST", "/v1/chat/completions", "Transfer-Encoding: chunked", "5\r\n{\"mes\r\n0\r\n\r\n"},
	{"OPTIONS", "/v1/chat/completions", "Origin: http://localhost:3000\nAccess-Control-Request-Method: POST\nAccess-Control-Request-Headers: authorization", ""},
	{"OPTIONS", "/v1/completions", "Origin: null\nAccess-Control-Request-Method: POST", ""},
	{"GET", "/v1/models", "Sec-Fetch-Site: cross-site", ""},
	{"GET", "/v1/models/demo", "Authorization: Bearer sekrit", ""},
	{"GET", "/health", "Host: [::1]:8080", ""},
	{"PUT", "/v1/completions", "", `{"prompt":"x"}`},
	{"POST", "/v1/completions", "", `{"prompt":"a","stop":"a","max_tokens":1,"ignore_eos":true,"seed":-1,"n":1,"logit_bias":{}}`},
	{"POST", "/v1/completions", "", `{"prompt":"x"} {}`},
}

// FuzzHandlers sends arbitrary requests (method, target, headers, body)
// through the HTTP parser into the server, with and without an API key,
// and checks what any answer must be: an OpenAI error or a whole response,
// never a 500, a panic or a hang; nothing refused reaches the generator,
// and nothing reaches it without the key or from a web page not allowed.
func FuzzHandlers(f *testing.F) {
	for _, s := range handlerSeeds {
		f.Add(s.method, s.target, s.header, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target, header string, body []byte) {
		for _, key := range []string{"", "sekrit"} {
			raw := method + " " + target + " HTTP/1.1\r\n"
			if !strings.Contains(strings.ToLower(header), "host:") {
				raw += "Host: 127.0.0.1:8080\r\n"
			}
			if header != "" {
				raw += strings.ReplaceAll(header, "\n", "\r\n") + "\r\n"
			}
			if !strings.Contains(strings.ToLower(header), "content-length:") && !strings.Contains(strings.ToLower(header), "transfer-encoding:") {
				raw += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
			}
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw + "\r\n" + string(body))))
			if err != nil {
				return // net/http answers these itself
			}
			req.RemoteAddr = "127.0.0.1:5000"
			opt := testOptions()
			opt.APIKey = key
			opt.MaxBodyBytes = 64 << 10
			opt.AllowOrigins = []string{"http://localhost:3000"}
			g := &strict{}
			s := New(g, opt)
			rec := httptest.NewRecorder()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.ServeHTTP(rec, req.WithContext(ctx))
			timedOut := ctx.Err() != nil
			cancel()
			if timedOut {
				t.Fatalf("key %q: the request took longer than 10 s:\n%s", key, raw)
			}
			checkAnswer(t, key, req, rec, len(g.reqs))
		}
	})
}

// checkAnswer holds one answer to what the server promises.
func checkAnswer(t *testing.T, key string, req *http.Request, rec *httptest.ResponseRecorder, generated int) {
	t.Helper()
	code, body := rec.Code, rec.Body.Bytes()
	switch code {
	case 200, 204, 400, 401, 403, 404, 405, 408, 413, 429:
	default:
		t.Fatalf("key %q: status %d for %s %s %v: %s", key, code, req.Method, req.URL, req.Header, body)
	}
	if generated > 1 {
		t.Fatalf("%d generations for one request", generated)
	}
	if generated == 1 && code != 200 {
		t.Fatalf("status %d after a generation: %s", code, body)
	}
	origin := req.Header.Get("Origin")
	if generated == 1 {
		if key != "" && !hasKey(req, key) {
			t.Fatalf("a generation without the key: %v", req.Header)
		}
		if origin != "" && origin != "http://localhost:3000" && origin != "http://"+req.Host {
			t.Fatalf("a generation for the web page at %q", origin)
		}
	}
	switch {
	case code == 204:
		if req.Method != http.MethodOptions {
			t.Fatalf("204 for %s", req.Method)
		}
	case code != 200:
		var e errorEnvelope
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d with a body that is not an OpenAI error: %s", code, body)
		}
	case rec.Header().Get("Content-Type") == "text/event-stream":
		evs := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
		last := evs[len(evs)-1]
		if last != "data: [DONE]" && !strings.Contains(last, `"error"`) {
			t.Fatalf("a stream that ends with %q", last)
		}
		for _, ev := range evs {
			data, ok := strings.CutPrefix(ev, "data: ")
			if !ok || (data != "[DONE]" && !json.Valid([]byte(data))) {
				t.Fatalf("stream event %q", ev)
			}
		}
	default:
		if !json.Valid(body) {
			t.Fatalf("200 with a body that is not JSON: %s", body)
		}
	}
}

// hasKey reports whether req carries key the way the server accepts it.
func hasKey(req *http.Request, key string) bool {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) == key
}
