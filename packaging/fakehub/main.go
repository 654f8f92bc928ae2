// Command fakehub serves a fake Hugging Face Hub on loopback for
// packaging/screenshot.sh and for trying `tandem hub` without the network:
// the demo models (../shared/models) as three repositories, plus a model
// of another vocabulary that no demo target can draft with. Downloads are
// slowed down (--rate) so the window can be seen mid-download.
//
//	go run ./packaging/fakehub --models ../shared/models --addr 127.0.0.1:8765
//	HF_ENDPOINT=http://127.0.0.1:8765 tandem hub search factory
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/tandem-run/tandem/engine/hub/hubtest"
)

func main() {
	models := flag.String("models", "../shared/models", "`folder` of the demo GGUF files")
	addr := flag.String("addr", "127.0.0.1:0", "loopback `address` to listen on")
	rate := flag.Int64("rate", 0, "serve file bodies at this many `bytes` a second (0: full speed)")
	flag.Parse()
	if err := serve(*models, *addr, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "fakehub:", err)
		os.Exit(1)
	}
}

func serve(models, addr string, rate int64) error {
	repos, err := hubtest.DemoRepos(models)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "fakehub")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	other := filepath.Join(tmp, "other-vocab-Q8_0.gguf")
	if err := hubtest.OtherVocab(filepath.Join(models, "factory-draft-Q8_0.gguf"), other); err != nil {
		return err
	}
	repos = append(repos, hubtest.Repo{ID: "tandem-demo/factory-othervocab-GGUF", Downloads: 45, Likes: 2,
		Files: []hubtest.RepoFile{{Path: "factory-othervocab-Q8_0.gguf", Local: other}}})
	h, err := hubtest.New("hf_fakehub", repos...)
	if err != nil {
		return err
	}
	h.SetFaults(hubtest.Faults{BytesPerSecond: rate})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		ln.Close()
		return fmt.Errorf("%s is not a loopback address", addr)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	return http.Serve(ln, h)
}
