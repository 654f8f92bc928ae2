package assets

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
)

func TestIcon(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(Icon()))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 512 || b.Dy() != 512 {
		t.Errorf("icon is %v, want 512x512", b)
	}
	if !bytes.Contains(IconSVG(), []byte("<svg")) {
		t.Error("IconSVG is not an SVG")
	}
}

func TestWriteDemoPairOpensAsGGUF(t *testing.T) {
	p, err := WriteDemoPair(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for path, arch := range map[string]string{p.Target: "qwen3", p.Draft: "llama"} {
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Arch() != arch {
			t.Errorf("%s: architecture %q, want %q", path, f.Arch(), arch)
		}
		f.Close()
	}
}

// A deleted cache, a truncated file or a stranger's bytes are all repaired.
func TestWriteDemoPairRepairs(t *testing.T) {
	dir := t.TempDir()
	p, err := WriteDemoPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(p.Target)
	damage := []func(){
		func() { os.RemoveAll(dir) },
		func() { os.Truncate(p.Target, 100) },
		func() { os.WriteFile(p.Target, bytes.Repeat([]byte{7}, len(want)), 0o644) },
	}
	for i, d := range damage {
		d()
		q, err := WriteDemoPair(dir)
		if err != nil {
			t.Fatalf("damage %d: %v", i, err)
		}
		if got, _ := os.ReadFile(q.Target); !bytes.Equal(got, want) {
			t.Errorf("damage %d: target not restored", i)
		}
	}
}

func TestWriteDemoPairConcurrent(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = WriteDemoPair(dir)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "demo"))
	if len(entries) != 2 {
		t.Errorf("demo dir holds %d entries, want the 2 models (no temporary files left)", len(entries))
	}
}

func TestWriteDemoPairUnwritable(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "demo")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteDemoPair(dir); err == nil {
		t.Error("no error when the demo directory is a file")
	}
}
