package chat

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// allocated runs f and returns the bytes the Go heap handed out meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Templates that multiply strings or lists past any prompt once took the
// process down (out of memory) or grew it by gigabytes. Each is refused
// by the render's budget while the values are still small: no render here
// may allocate more than 64 MB.
func TestTemplateMemoryBudget(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}, {Role: "user", Content: strings.Repeat("x", 1000)}}
	for _, c := range []struct{ name, source string }{
		{"repeat", "{{ 'a' * 200000000 }}"},
		{"repeat twice", "{% set s = 'aaaaaaaaaa' * 100000 %}{{ s * 100000 }}"},
		{"repeat a message", "{{ messages[2].content * 1000000 }}"},
		{"negative repeat", "{{ 'a' * -5 }}{{ 'b' * 200000000 }}"},
		{"doubling", "{% set ns = namespace(s='ab') %}{% for c in 'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz' %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}"},
		{"doubling with +", "{% set ns = namespace(s='ab') %}{% for m in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}"},
		{"list doubling", "{% set ns = namespace(l=[1]) %}{% for m in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}"},
		{"nested list doubling", "{% set ns = namespace(l=[1]) %}{% for m in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}"},
		{"join separator", "{% set sep = 'x' * 1000000 %}{{ range(50000)|join(sep) }}"},
		{"replace", "{% set big = 'y' * 1000000 %}{{ ('z' * 100000)|replace('z', big) }}"},
		{"replace method", "{% set big = 'y' * 1000000 %}{{ ('z' * 100000).replace('z', big) }}"},
		{"replace empty", "{% set big = 'y' * 100000 %}{{ ('z' * 100000).replace('', big) }}"},
		{"indent", "{{ ('\\n' * 1000000)|indent(1000000) }}"},
		{"tojson indent", "{{ range(50000)|list|tojson(indent=100000) }}"},
		{"append", "{% set l = [] %}{% for i in range(100000) %}{% for j in range(10) %}{% set _ = l.append('q' * 100000) %}{% endfor %}{% endfor %}{{ l|length }}"},
		{"many strings", "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [('w' * 3000000) ~ i] %}{% endfor %}{{ ns.l|length }}"},
		{"split", "{{ (',' * 3000000).split(',')|length }}"},
		{"chars", "{% for c in 'c' * 3000000 %}{% endfor %}"},
		{"output", "{% for i in range(100000) %}{{ messages[2].content }}{{ messages[2].content }}{% endfor %}"},
		{"text", "{% for i in range(100000) %}" + strings.Repeat("t", 4000) + "{% endfor %}"},
	} {
		tmpl, err := New(c.source, "", "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var rerr error
		n := allocated(func() {
			_, rerr = tmpl.Render(context.Background(), msgs, Options{})
		})
		if !errors.Is(rerr, ErrTemplate) {
			t.Errorf("%s: %v, want ErrTemplate", c.name, rerr)
		}
		if n > 64<<20 {
			t.Errorf("%s: %d MB allocated (%v)", c.name, n>>20, rerr)
		}
	}
}

// A render past its time limit, or whose ctx ends, stops: it once returned
// to the caller while its goroutine went on running (and allocating).
func TestTemplateTimeoutStopsTheRender(t *testing.T) {
	slow := "{% for a in messages %}{% for b in messages %}{% for c in messages %}{% for d in messages %}{% for e in messages %}{{ a.content ~ b.content ~ c.content ~ d.content ~ e.content }}{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}"
	tmpl, err := New(slow, "", "")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]Message, 60) // 60^5 = 7.8e8 iterations
	for i := range msgs {
		msgs[i] = Message{Role: "user", Content: "x"}
	}
	base := runtime.NumGoroutine()
	for _, c := range []struct {
		name   string
		limits Limits
		ctx    func() (context.Context, context.CancelFunc)
		want   error
	}{
		{"time limit", Limits{Time: 50 * time.Millisecond}, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, ErrTemplate},
		{"deadline", Limits{}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		ctx, cancel := c.ctx()
		l := tmpl.limits
		if c.limits.Time != 0 {
			l.Time = c.limits.Time
		}
		_, err := tmpl.WithLimits(l).Render(ctx, msgs, Options{})
		cancel()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		// Nothing may go on rendering once Render has returned.
		var m1, m2 runtime.MemStats
		runtime.ReadMemStats(&m1)
		time.Sleep(200 * time.Millisecond)
		runtime.ReadMemStats(&m2)
		if g := runtime.NumGoroutine(); g > base || m2.TotalAlloc-m1.TotalAlloc > 1<<20 {
			t.Errorf("%s: after Render returned: %d goroutines (%d before), %d KB allocated in 200 ms", c.name, g, base, (m2.TotalAlloc-m1.TotalAlloc)>>10)
		}
	}
}

// BenchmarkRenderQwen3 prices the guards: the Qwen3 template over a short
// conversation, through Render and through the unguarded engine.
func BenchmarkRenderQwen3(b *testing.B) {
	tmpl := configTemplateB(b, "qwen3")
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 2+2?"}, {Role: "assistant", Content: "<think>\nadd\n</think>\n\n4."}, {Role: "user", Content: "And 3+3?"}}
	b.Run("guarded", func(b *testing.B) {
		for b.Loop() {
			if _, err := tmpl.Render(context.Background(), msgs, Options{AddGenerationPrompt: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	plain, err := jinja.Compile(tmpl.Source())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			vars, err := tmpl.variables(msgs, Options{AddGenerationPrompt: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := plain.RenderValues(vars); err != nil {
				b.Fatal(err)
			}
		}
	})
}
