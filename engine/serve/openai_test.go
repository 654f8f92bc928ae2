package serve

import (
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIClient points OpenAI's own Go client at the server: streamed
// and whole chat, streamed text, the model list, and an error it must
// recognise as an API error.
func TestOpenAIClient(t *testing.T) {
	opt := testOptions()
	opt.APIKey = "k"
	srv := startServer(t, &echo{}, opt)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("k"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	ctx := t.Context()

	params := openai.ChatCompletionNewParams{
		Model:               "demo",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("streamed words here")},
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		Seed:                openai.Int(1),
		Temperature:         openai.Float(0),
		MaxCompletionTokens: openai.Int(50),
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"zzz"}},
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var tandem string
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused chunk %d: %s", chunks, ch.RawJSON())
		}
		if f, ok := ch.JSON.ExtraFields["tandem"]; ok {
			tandem = f.Raw()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "streamed words here" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed chat: %+v", acc.Choices)
	}
	if acc.Usage.PromptTokens != 6 || acc.Usage.CompletionTokens != 3 || acc.Usage.TotalTokens != 9 {
		t.Errorf("usage %+v", acc.Usage)
	}
	if !strings.Contains(tandem, `"drafted":6`) || !strings.Contains(tandem, `"acceptance":0.5`) {
		t.Errorf("tandem field %q", tandem)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	whole, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Choices[0].Message.Content != "streamed words here" || whole.Usage.CompletionTokens != 3 || whole.Model != "demo" {
		t.Errorf("whole chat: %s", whole.RawJSON())
	}

	text := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("a b c")}, MaxTokens: openai.Int(2)})
	var got strings.Builder
	finish := ""
	for text.Next() {
		c := text.Current()
		for _, ch := range c.Choices {
			got.WriteString(ch.Text)
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if err := text.Err(); err != nil {
		t.Fatal(err)
	}
	text.Close()
	if got.String() != "a b " || finish != "length" {
		t.Errorf("streamed text %q, finish %q", got.String(), finish)
	}

	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "demo" {
		t.Errorf("models: %v %+v", err, models)
	}

	params.N = openai.Int(2)
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "n" || apiErr.Type != typeInvalidRequest {
		t.Errorf("n=2: %v", err)
	}
}
