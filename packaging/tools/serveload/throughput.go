package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// throughput is the -throughput phase (issue 23's parallel requests): the
// distinct prompts are first asked one after another, greedy, for their
// solo text; then n streamed requests, prompt i%distinct each, go at
// once, and each must end whole with its prompt's solo text. It prints the
// aggregate generated tokens per second of both: run it against
// `tandem serve --parallel 1` and `--parallel 8` to compare.
func throughput(base, key string, n, distinct, maxTokens int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	solo := make([]streamed, distinct)
	start := time.Now()
	tokens := 0
	for i := range solo {
		s := stream(client, base, key, i, maxTokens)
		if s.err != nil {
			return fmt.Errorf("solo prompt %d: %w", i, s.err)
		}
		solo[i] = s
		tokens += s.tokens
	}
	took := time.Since(start).Seconds()
	fmt.Printf("solo: %d requests one after another, %d tokens in %.2f s: %.1f tok/s\n", distinct, tokens, took, float64(tokens)/took)

	got := make([]streamed, n)
	var wg sync.WaitGroup
	start = time.Now()
	for i := range got {
		wg.Go(func() { got[i] = stream(client, base, key, i%distinct, maxTokens) })
	}
	wg.Wait()
	took = time.Since(start).Seconds()
	tokens = 0
	differ, mixed, failed := 0, 0, 0
	shared := maxTokens * 64 // the least text a differing stream shares with its solo one
	var firsts []float64
	for i, s := range got {
		switch {
		case s.err != nil:
			failed++
			if failed <= 5 {
				fmt.Printf("  request %d: %v\n", i, s.err)
			}
		case s.text != solo[i%distinct].text:
			// A kernel that rounds another way for another batch shape
			// turns a near tie after a common start; a sequence mixed up
			// with another follows another prompt's text.
			own := commonPrefix(s.text, solo[i%distinct].text)
			differ++
			shared = min(shared, own)
			other, with := -1, 0 // the other prompt whose text it shares most of
			for j, o := range solo {
				if c := commonPrefix(s.text, o.text); j != i%distinct && c > with {
					other, with = j, c
				}
			}
			if with > own {
				mixed++
				fmt.Printf("  request %d follows prompt %d's text: %d bytes in common with it, %d with its own: %q\n", i, other, with, own, s.text)
			} else {
				fmt.Printf("  request %d turns from its solo text after %d bytes: %q, solo %q\n", i, own,
					s.text[own:min(len(s.text), own+40)], solo[i%distinct].text[own:min(len(solo[i%distinct].text), own+40)])
			}
		}
		tokens += s.tokens
		firsts = append(firsts, s.first.Seconds())
	}
	fmt.Printf("together: %d streams at once, %d tokens in %.2f s: %.1f tok/s aggregate; %d failed; first text after %.2f s at most\n",
		n, tokens, took, float64(tokens)/took, failed, maxOf(firsts))
	if differ > 0 {
		fmt.Printf("  %d differ from their solo text, after %d bytes in common at least; %d follow another prompt's text\n", differ, shared, mixed)
	} else {
		fmt.Println("  each equals its solo text")
	}
	return nil
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// streamed is one streamed completion: its text, its completion tokens
// (from the usage chunk), when its first text came, and what went wrong.
type streamed struct {
	text   string
	tokens int
	first  time.Duration
	err    error
}

// stream asks for a greedy streamed completion of prompt i that generates
// exactly maxTokens tokens (ignore_eos), with usage.
func stream(client *http.Client, base, key string, i, maxTokens int) streamed {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	body := fmt.Sprintf(`{"prompt":"Chapter %d.","max_tokens":%d,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, i+1, maxTokens)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return streamed{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return streamed{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return streamed{err: fmt.Errorf("status %d: %.200s", resp.StatusCode, b)}
	}
	var s streamed
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return streamed{err: fmt.Errorf("bad event %.200s", data)}
		}
		for _, c := range chunk.Choices {
			if c.Text != "" && s.first == 0 {
				s.first = time.Since(start)
			}
			text.WriteString(c.Text)
		}
		if chunk.Usage != nil {
			s.tokens = chunk.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return streamed{err: err}
	}
	if !done {
		return streamed{err: fmt.Errorf("stream without [DONE]")}
	}
	s.text = text.String()
	return s
}
