package serve

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tandem-run/tandem/engine"
)

// kvReporter is a Generator that can say what its KV caches hold (the
// local engine); the server then reports their use per device.
type kvReporter interface {
	KVCaches() ([]engine.KVCache, int)
}

// metrics are the server's Prometheus metrics, in a registry of its own
// (the client library's global one would be shared state between
// servers, and tests start many).
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec // by endpoint and outcome
	prompt    prometheus.Counter
	generated prometheus.Counter
	drafted   prometheus.Counter
	accepted  prometheus.Counter
	ttft      prometheus.Histogram
	tokS      prometheus.Histogram
	running   prometheus.Gauge
	kvTokens  atomic.Int64 // tokens of the running requests in the KV cache
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_requests_total",
		Help: "Completion requests answered, by endpoint and outcome (a finish reason, or error or cancelled)."},
		[]string{"endpoint", "outcome"})
	m.prompt = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_prompt_tokens_total", Help: "Prompt tokens of the requests run."})
	m.generated = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_generated_tokens_total", Help: "Tokens generated."})
	m.drafted = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_draft_tokens_total", Help: "Tokens the draft proposed."})
	m.accepted = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_draft_accepted_tokens_total", Help: "Drafted tokens the target accepted."})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_time_to_first_token_seconds",
		Help:    "From a request's arrival to its first text, waiting in the queue included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)})
	m.tokS = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_decode_tokens_per_second",
		Help:    "Each request's decode speed: generated tokens over decode time.",
		Buckets: prometheus.ExponentialBuckets(4, 2, 12)})
	m.running = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tandem_requests_running", Help: "Requests generating now."})
	queue := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_queue_length", Help: "Requests waiting for the model."},
		func() float64 { return float64(s.queue.waiting()) })
	m.reg.MustRegister(m.requests, m.prompt, m.generated, m.drafted, m.accepted, m.ttft, m.tokS, m.running, queue)
	if kv, ok := s.gen.(kvReporter); ok {
		m.registerKV(kv, s.opt.Parallel)
	}
	return m
}

// registerKV adds the KV caches' size and use per device and model. The
// caches are allocated at load and hold every layer's K and V for each
// position, so the bytes a request uses are its share of the context; a
// target that decodes parallel requests together holds a context for
// each, and its draft is not used.
func (m *metrics) registerKV(kv kvReporter, parallel int) {
	caches, context := kv.KVCaches()
	if context <= 0 {
		return
	}
	for _, c := range caches {
		labels := prometheus.Labels{"device": strconv.Itoa(c.Device), "model": c.Owner}
		size := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tandem_kv_cache_bytes",
			Help: "Bytes allocated for the attention KV cache, by device and model.", ConstLabels: labels})
		size.Set(float64(c.Bytes))
		bytes, tokens := c.Bytes, int64(context)
		switch {
		case c.Owner == "target":
			tokens *= int64(parallel)
		case parallel > 1:
			bytes = 0
		}
		used := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_kv_cache_used_bytes",
			Help: "Bytes of the KV cache holding the running requests' tokens, by device and model.", ConstLabels: labels},
			func() float64 {
				return float64(bytes) * float64(min(m.kvTokens.Load(), tokens)) / float64(tokens)
			})
		m.reg.MustRegister(size, used)
	}
}

// observe counts one finished request.
func (m *metrics) observe(ep endpoint, st engine.Stats, outcome string) {
	name := "completions"
	if ep.chat {
		name = "chat_completions"
	}
	m.requests.WithLabelValues(name, outcome).Inc()
	m.prompt.Add(float64(st.PromptTokens))
	m.generated.Add(float64(st.GeneratedTokens))
	m.drafted.Add(float64(st.Drafted))
	m.accepted.Add(float64(st.Accepted))
	if st.GeneratedTokens > 0 && st.DecodeSeconds > 0 {
		m.tokS.Observe(st.DecodeTokS())
	}
}

// firstText records the time to a request's first text.
func (m *metrics) firstText(since time.Duration) { m.ttft.Observe(since.Seconds()) }

// handler serves the registry in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
