// Command serveload measures a running `tandem serve` under the loads of
// issue 19 and prints one line per phase:
//
//		tandem serve --api-key k --addr 127.0.0.1:18080 &
//		serveload -url http://127.0.0.1:18080 -key k -pid $!
//
//	 1. idle: the server's resident memory (from /proc/PID/status) after one
//	    completion, so that the model's pages and buffers are in place.
//	 2. streams: -streams streamed chat completions at once; each must end
//	    with [DONE] or be a 429; anything else (a transport error, another
//	    status, a stream cut short) is counted as an error.
//	 3. slow: -slow connections that announce a body of 200,000 bytes and send
//	    a few of them, without the key; while they are open, one client with
//	    the key asks for a completion; then each slow connection's answer is
//	    read (401 expected at once).
//	 4. after: resident memory every 10 s while the server is idle, for
//	    -settle.
//
// With -throughput N it runs issue 23's parallel-requests measurement
// instead (throughput.go): -distinct prompts alone, then N streamed greedy
// requests at once, each checked against its prompt's solo text, and the
// aggregate tokens per second of both:
//
//	tandem serve --parallel 8 --addr 127.0.0.1:18080 &
//	serveload -url http://127.0.0.1:18080 -throughput 32 -max-tokens 128
//
// It is a measuring tool, not a test: the server's numbers depend on the
// machine.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "the server")
	key := flag.String("key", "", "its API key")
	pid := flag.Int("pid", 0, "its process id, for resident memory (0: not measured)")
	streams := flag.Int("streams", 200, "streamed requests at once")
	maxTokens := flag.Int("max-tokens", 32, "tokens each streamed request asks for")
	slow := flag.Int("slow", 1000, "slow-body connections without the key")
	settle := flag.Duration("settle", 30*time.Second, "idle time before the last memory reading")
	through := flag.Int("throughput", 0, "measure aggregate tok/s of this many greedy streams at once instead of the load phases (0: off)")
	distinct := flag.Int("distinct", 8, "distinct prompts of -throughput")
	flag.Parse()
	if *through > 0 {
		if err := throughput(*base, *key, *through, max(1, *distinct), *maxTokens); err != nil {
			fmt.Fprintln(os.Stderr, "serveload:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*base, *key, *pid, *streams, *maxTokens, *slow, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(1)
	}
}

func run(base, key string, pid, streams, maxTokens, slow int, settle time.Duration) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	if status, body := complete(base, key); status != 200 {
		return fmt.Errorf("the first completion: %d %s", status, body)
	}
	idle := rss(pid)
	fmt.Printf("idle: RSS %s\n", mib(idle))

	peak := watchRSS(pid)
	start := time.Now()
	counts, errs := load(base, key, streams, maxTokens)
	fmt.Printf("streams: %d at once in %.1f s: %v, errors %d, RSS peak %s\n", streams, time.Since(start).Seconds(), counts, len(errs), mib(peak()))
	for i, err := range errs {
		if i == 5 {
			fmt.Printf("  ... %d more\n", len(errs)-5)
			break
		}
		fmt.Println("  error:", err)
	}

	conns, err := slowBodies(u.Host, slow)
	if err != nil {
		return err
	}
	start = time.Now()
	status, body := complete(base, key)
	served := time.Since(start)
	answers := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			st := 0
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				st = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			answers[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Printf("slow: %d slow-body connections without the key; the client with the key got %d in %.2f s (%d bytes); the slow ones got %v\n",
		len(conns), status, served.Seconds(), len(body), answers)

	for waited := time.Duration(0); waited < settle; {
		step := min(10*time.Second, settle-waited)
		time.Sleep(step)
		waited += step
		after := rss(pid)
		change := 0.0
		if idle > 0 {
			change = 100 * (float64(after) - float64(idle)) / float64(idle)
		}
		fmt.Printf("after %s idle: RSS %s (%+.0f%% of idle)\n", waited, mib(after), change)
	}
	return nil
}

// load sends n streamed chat completions at once and counts the statuses.
func load(base, key string, n, maxTokens int) (map[int]int, []error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		errs   []error
		wg     sync.WaitGroup
	)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Tell me a fortune."}],"max_tokens":%d,"temperature":0.8,"stream":true}`, maxTokens)
	for range n {
		wg.Go(func() {
			status, err := func() (int, error) {
				req, err := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					return 0, err
				}
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				switch {
				case err != nil:
					return resp.StatusCode, err
				case resp.StatusCode == 200 && !strings.HasSuffix(string(b), "data: [DONE]\n\n"):
					return resp.StatusCode, fmt.Errorf("stream without [DONE]: %.200s", b)
				case resp.StatusCode != 200 && resp.StatusCode != 429:
					return resp.StatusCode, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
				}
				return resp.StatusCode, nil
			}()
			mu.Lock()
			defer mu.Unlock()
			counts[status]++
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return counts, errs
}

// slowBodies opens n connections, each announcing a body it never sends.
func slowBodies(host string, n int) ([]net.Conn, error) {
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\"messages\":["
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", host)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		if _, err := io.WriteString(c, head); err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// complete asks for one short completion with the key.
func complete(base, key string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"Quote Genesis 1:3."}],"max_tokens":16}`))
	req.Header.Set("Authorization", "Bearer "+key)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// rss is the resident memory of process pid in bytes (0 when unknown).
func rss(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// watchRSS samples rss every 50 ms until the returned function is called,
// which gives the highest reading.
func watchRSS(pid int) func() int64 {
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		var most int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			most = max(most, rss(pid))
			select {
			case <-stop:
				done <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-done
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
