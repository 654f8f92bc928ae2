package chat

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// templateCase is one case of ../shared/oracle/chat-templates.json, rendered
// by jinja2 with HF transformers' settings.
type templateCase struct {
	Input struct {
		Messages            []Message `json:"messages"`
		AddGenerationPrompt bool      `json:"add_generation_prompt"`
		EnableThinking      *bool     `json:"enable_thinking"`
	} `json:"input"`
	Output string `json:"output"`
}

func loadCases(t *testing.T) map[string][]templateCase {
	t.Helper()
	b, err := os.ReadFile(sharedtest.Path(t, "oracle", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Templates map[string][]templateCase `json:"templates"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Templates) == 0 {
		t.Fatal("no template cases")
	}
	return f.Templates
}

// configTemplate reads a template and its special tokens from an HF
// tokenizer_config.json.
func configTemplate(t *testing.T, name string) *Template { return configTemplateB(t, name) }

func configTemplateB(t testing.TB, name string) *Template {
	t.Helper()
	b, err := os.ReadFile(sharedtest.Path(t, "testdata", "vocab", name+"-tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
		BOS          any    `json:"bos_token"` // a string, or null
		EOS          any    `json:"eos_token"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	tmpl, err := New(cfg.ChatTemplate, str(cfg.BOS), str(cfg.EOS))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func ggufTemplate(t *testing.T, name string) *Template {
	t.Helper()
	f, err := gguf.Open(sharedtest.Path(t, "testdata", "vocab", "vocab-"+name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tmpl, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func renderCases(t *testing.T, name string, tmpl *Template, cases []templateCase) {
	t.Helper()
	pass := 0
	for i, c := range cases {
		got, err := tmpl.Render(context.Background(), c.Input.Messages, Options{
			AddGenerationPrompt: c.Input.AddGenerationPrompt,
			EnableThinking:      c.Input.EnableThinking,
		})
		if err != nil {
			t.Errorf("%s case %d: %v", name, i, err)
			continue
		}
		if got != c.Output {
			t.Errorf("%s case %d:\n got %q\nwant %q", name, i, got, c.Output)
			continue
		}
		pass++
	}
	t.Logf("%s: %d/%d cases render byte for byte", name, pass, len(cases))
}

func TestReferenceTemplates(t *testing.T) {
	for name, cases := range loadCases(t) {
		t.Run(name+"/tokenizer_config", func(t *testing.T) {
			renderCases(t, name, configTemplate(t, name), cases)
		})
		t.Run(name+"/gguf", func(t *testing.T) {
			tmpl := ggufTemplate(t, name)
			if tmpl.Source() != configTemplate(t, name).Source() {
				t.Errorf("the GGUF's template differs from tokenizer_config.json's")
			}
			renderCases(t, name, tmpl, cases)
		})
	}
}

func TestFactoryTemplateIsChatML(t *testing.T) {
	f, err := gguf.Open(sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tmpl, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Tell me a fortune."}}
	for _, gen := range []bool{true, false} {
		got, err := tmpl.Render(context.Background(), msgs, Options{AddGenerationPrompt: gen})
		if err != nil {
			t.Fatal(err)
		}
		if want := ChatML(msgs, gen); got != want {
			t.Errorf("generation prompt %v: got %q, ChatML gives %q", gen, got, want)
		}
	}
}

func TestUnusableTemplates(t *testing.T) {
	for _, c := range []struct{ name, source, why string }{
		{"syntax", "{% for m in messages %}", ""},
		{"self-recursive macro", "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}", "call themselves"},
		{"mutual recursion", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "call themselves"},
		{"macro as a value", "{% macro f() %}{{ g() }}{% endmacro %}{% set g = f %}{{ f() }}", "as a value"},
		{"recursive loop", "{% for m in messages recursive %}{{ loop(m) }}{% endfor %}", "recursive loop"},
		{"oversized", strings.Repeat("x", MaxTemplateBytes+1), "over the"},
	} {
		_, err := New(c.source, "", "")
		if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: New error %v, want ErrTemplate mentioning %q", c.name, err, c.why)
		}
	}
	// A macro calling another is fine.
	tmpl, err := New("{% macro a(x) %}<{{ x }}>{% endmacro %}{% macro b(x) %}{{ a(x) }}{{ a(x) }}{% endmacro %}{{ b(1) }}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tmpl.Render(context.Background(), nil, Options{}); err != nil || out != "<1><1>" {
		t.Errorf("nested macros: %q, %v", out, err)
	}
}

func TestRenderFailures(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hi"}}
	for _, c := range []struct {
		name, source, why string
		limits            Limits
	}{
		{"raise_exception", "{{ raise_exception('Conversation roles must alternate') }}", "roles must alternate", Limits{}},
		{"huge range", "{% for i in range(1000000000) %}{% endfor %}", "range", Limits{}},
		{"nested ranges", "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "range", Limits{}},
		{"output", "{% for i in range(100) %}{{ messages[0].content * 10000 }}{% endfor %}", "over the", Limits{Output: 1 << 20}},
		{"time", "{% for a in messages %}{% for b in messages %}{% for c in messages %}{% for d in messages %}{{ '' }}{% endfor %}{% endfor %}{% endfor %}{% endfor %}",
			"took over", Limits{Time: time.Microsecond}},
	} {
		tmpl, err := New(c.source, "", "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		l := Limits{Time: DefaultTimeLimit, Output: DefaultOutputLimit, Range: DefaultRangeLimit}
		if c.limits.Time != 0 {
			l.Time = c.limits.Time
		}
		if c.limits.Output != 0 {
			l.Output = c.limits.Output
		}
		in := msgs
		if c.name == "time" {
			in = make([]Message, 20) // 20^4 = 160k iterations: far beyond a microsecond
		}
		_, err = tmpl.WithLimits(l).Render(context.Background(), in, Options{})
		if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: Render error %v, want ErrTemplate mentioning %q", c.name, err, c.why)
		}
	}
}

func TestRenderCancelled(t *testing.T) {
	tmpl, err := New("{{ messages[0].content }}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tmpl.Render(ctx, []Message{{Role: "user", Content: "hi"}}, Options{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTemplate) {
		t.Errorf("cancelled render: %v, want context.Canceled and not ErrTemplate", err)
	}
}

func TestDateString(t *testing.T) {
	tmpl, err := New("{{ date_string | default('none') }}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want string
	}{{now, "04 Jul 2026"}, {time.Time{}, "none"}} {
		if got, err := tmpl.Render(context.Background(), nil, Options{Now: c.now}); err != nil || got != c.want {
			t.Errorf("Now %v: %q, %v; want %q", c.now, got, err, c.want)
		}
	}
}

func TestChatML(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}}
	want := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
	if got := ChatML(msgs, true); got != want {
		t.Errorf("ChatML = %q, want %q", got, want)
	}
	if got := ChatML(msgs, false); got != strings.TrimSuffix(want, "<|im_start|>assistant\n") {
		t.Errorf("ChatML without generation prompt = %q", got)
	}
}
