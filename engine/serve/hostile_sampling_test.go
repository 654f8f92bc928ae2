package serve

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// callWithin is call with a deadline: the bug guarded against left a
// request (and every later one) hanging.
func callWithin(t *testing.T, srv *httptest.Server, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", path, body, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %s: no complete answer within a minute", path, body)
	}
	return resp.StatusCode, b.String()
}

func demoServer(t *testing.T, target string) *httptest.Server {
	t.Helper()
	r, err := engine.Load(t.Context(), engine.Config{Target: target, Context: 256}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return startServer(t, r, testOptions())
}

const normalRequest = `{"model":"demo","prompt":"Once upon a time","max_tokens":4,"temperature":0}`

// "repeat_penalty":1e-40 with "top_p":0.9 once looped forever in the
// sampler, and every later request timed out behind it. Now it is answered
// (the penalty is clamped, or refused) and the next request is served.
func TestHostileSamplingIsAnswered(t *testing.T) {
	srv := demoServer(t, sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"))
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"demo","prompt":"hi","max_tokens":8,"temperature":1,"repeat_penalty":1e-40,"top_p":0.9}`},
		{"/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":1,"repeat_penalty":1e-40,"top_p":0.9}`},
		{"/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":1e-300,"top_p":0.9,"stream":true}`},
	} {
		status, body := callWithin(t, srv, c.path, c.body)
		if status != http.StatusOK && (status < 400 || status >= 500) {
			t.Errorf("%s: status %d: %s", c.body, status, body)
		}
		if status, body := callWithin(t, srv, "/v1/completions", normalRequest); status != http.StatusOK {
			t.Fatalf("the request after %s: status %d: %s", c.body, status, body)
		}
	}
}

// A model whose output norm holds a NaN gives NaN logits: a sampled request
// gets an error response naming them rather than hanging, and the server
// answers the next request.
func TestNaNModelIsAnError(t *testing.T) {
	src := sharedtest.Path(t, "models", "factory-target-F16.gguf") // Q8_0 activations would round the NaN away
	path := filepath.Join(t.TempDir(), "nan.gguf")
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w gguf.Writer
	for _, kv := range f.KV {
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Name == "output_norm.weight" {
			if ti.Type != quant.F32 {
				t.Fatalf("output_norm.weight is %v", ti.Type)
			}
			data = append([]byte(nil), data...)
			nan := math.Float32bits(float32(math.NaN()))
			data[0], data[1], data[2], data[3] = byte(nan), byte(nan>>8), byte(nan>>16), byte(nan>>24)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	srv := demoServer(t, path)
	sampled := `{"model":"demo","prompt":"hi","max_tokens":8,"temperature":1,"top_p":0.9}`
	for range 2 {
		status, body := callWithin(t, srv, "/v1/completions", sampled)
		if status < 400 || !strings.Contains(body, "not finite") {
			t.Errorf("NaN logits: status %d: %s", status, body)
		}
	}
	streamed := `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":1,"top_p":0.9,"stream":true}`
	if _, body := callWithin(t, srv, "/v1/chat/completions", streamed); !strings.Contains(body, "not finite") {
		t.Errorf("NaN logits, streamed: %s", body)
	}
}
