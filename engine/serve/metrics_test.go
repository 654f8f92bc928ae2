package serve

import (
	"bytes"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tandem-run/tandem/engine"
)

// scrape fetches /metrics and parses it with Prometheus' own text parser.
func scrape(t *testing.T, status int, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// value is the value of the one metric of a family whose labels include
// labels (name, value pairs); a counter, gauge or histogram's count.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Errorf("no %s", name)
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Errorf("no %s%v", name, labels)
	return -1
}

// TestMetrics: after a few requests, /metrics (behind the API key, like
// the API) parses as Prometheus text and counts what the requests did: the
// echo generator makes one token per word, 2 drafted and 1 accepted each,
// at 4 tokens a second.
func TestMetrics(t *testing.T) {
	opt := testOptions()
	opt.APIKey = "k"
	srv := startServer(t, &echo{}, opt)
	auth := []string{"Authorization", "Bearer k"}
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"one two three"}]}`,
		`{"messages":[{"role":"user","content":"four five"}],"stream":true}`,
	} {
		if status, b, _ := call(t, srv, "POST", "/v1/chat/completions", body, auth...); status != 200 {
			t.Fatalf("%d %s", status, b)
		}
	}
	if status, b, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"a b c d","max_tokens":2}`, auth...); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if status, _, _ := call(t, srv, "GET", "/metrics", ""); status != 401 {
		t.Errorf("/metrics without the key: %d", status)
	}
	status, body, _ := call(t, srv, "GET", "/metrics", "", auth...)
	fams := scrape(t, status, body)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tandem_requests_total", []string{"endpoint", "chat_completions", "outcome", "stop"}, 2},
		{"tandem_requests_total", []string{"endpoint", "completions", "outcome", "length"}, 1},
		{"tandem_generated_tokens_total", nil, 3 + 2 + 2},
		{"tandem_prompt_tokens_total", nil, (3 + 3) + (2 + 3) + (4 + 3)},
		{"tandem_draft_tokens_total", nil, 2 * 7},
		{"tandem_draft_accepted_tokens_total", nil, 7},
		{"tandem_time_to_first_token_seconds", nil, 3},
		{"tandem_decode_tokens_per_second", nil, 3},
		{"tandem_queue_length", nil, 0},
		{"tandem_requests_running", nil, 0},
	} {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if h := fams["tandem_decode_tokens_per_second"].GetMetric()[0].GetHistogram(); h.GetSampleSum() != 3*4 {
		t.Errorf("tok/s sum %g, want 12 (three requests at 4 tok/s)", h.GetSampleSum())
	}
}

// TestMetricsKVCache: with the engine, /metrics has the KV caches of the
// target and the draft on their device, and what the running request uses
// of them (nothing once it has ended).
func TestMetricsKVCache(t *testing.T) {
	r := loadDemoPair(t)
	caches, n := r.KVCaches()
	srv := startServer(t, r, testOptions())
	if status, b, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"Chapter 1.","max_tokens":3}`); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	status, body, _ := call(t, srv, "GET", "/metrics", "")
	fams := scrape(t, status, body)
	if len(caches) != 2 || n != 256 {
		t.Fatalf("caches %+v, context %d", caches, n)
	}
	for _, c := range caches {
		labels := []string{"device", "0", "model", c.Owner}
		if got := value(t, fams, "tandem_kv_cache_bytes", labels...); got != float64(c.Bytes) || got <= 0 {
			t.Errorf("%s KV bytes %g, want %d", c.Owner, got, c.Bytes)
		}
		if got := value(t, fams, "tandem_kv_cache_used_bytes", labels...); got != 0 {
			t.Errorf("%s KV used %g after the request", c.Owner, got)
		}
	}
	if got := value(t, fams, "tandem_generated_tokens_total"); got != 3 {
		t.Errorf("generated %g", got)
	}
}

// kvEcho is echo with a KV cache of 1000 bytes on device 1 for a context
// of 100 tokens.
type kvEcho struct{ *echo }

func (kvEcho) KVCaches() ([]engine.KVCache, int) {
	return []engine.KVCache{{Device: 1, Owner: "target", Bytes: 1000}}, 100
}

// TestMetricsKVUseWhileRunning: while a request runs, the KV use is its
// tokens' share of the cache; the queue length counts the one waiting.
func TestMetricsKVUseWhileRunning(t *testing.T) {
	gen := kvEcho{&echo{gate: make(chan struct{})}}
	srv := startServer(t, gen, testOptions())
	done := make(chan int, 2)
	for range 2 {
		go func() {
			status, _, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"a b c d e","max_tokens":3}`)
			done <- status
		}()
	}
	gen.gate <- struct{}{} // the first token of the running request
	// echo: 5 words + 3 prompt tokens, and 1 generated: 9 of 100 tokens.
	for {
		status, body, _ := call(t, srv, "GET", "/metrics", "")
		fams := scrape(t, status, body)
		if value(t, fams, "tandem_kv_cache_used_bytes", "device", "1") == 90 && value(t, fams, "tandem_queue_length") == 1 {
			if got := value(t, fams, "tandem_requests_running"); got != 1 {
				t.Errorf("running %g", got)
			}
			break
		}
		waitBriefly()
	}
	for range 5 {
		gen.gate <- struct{}{}
	}
	for range 2 {
		if status := <-done; status != 200 {
			t.Errorf("status %d", status)
		}
	}
}
