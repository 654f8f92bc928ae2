package hub

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub/hubtest"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/quant"
)

// planJSON plans target (and draft) over two virtual 64 MiB GPUs, as
// `tandem plan --json` would print it.
func planJSON(t *testing.T, target, draft *gguf.File) string {
	t.Helper()
	inv, err := device.ParseVirtual("cuda0:64MiB,cuda0:64MiB")
	if err != nil {
		t.Fatal(err)
	}
	in := plan.Input{Target: target, Draft: draft, Devices: inv.Devices, Ctx: 2048, Batch: 512, KV: plan.SameKV(quant.F16),
		TargetPlacement: plan.Placement{Devices: []int{0, 1}}, DraftPlacement: plan.Placement{Devices: []int{1}}}
	if draft == nil {
		in.DraftPlacement = plan.Placement{}
	}
	p, err := plan.Make(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p.Report())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every demo file's plan from its remote header equals the plan from the
// local file, for a fraction of the file's bytes.
func TestHeaderOnlyPlan(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	targetLocal, err := gguf.Open(filepath.Join(fx.models, "factory-target-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer targetLocal.Close()
	var total, fetched int64
	for _, repo := range []string{hubtest.TargetRepo, hubtest.DraftRepo, hubtest.Eagle3Repo} {
		rf, err := fx.c.Files(ctx, repo, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rf.Models {
			remote, st, err := fx.c.Header(ctx, repo, rf.Commit, m)
			if err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
			local, err := gguf.Open(filepath.Join(fx.models, m.Name))
			if err != nil {
				t.Fatal(err)
			}
			var got, want string
			if repo == hubtest.TargetRepo {
				got, want = planJSON(t, remote, nil), planJSON(t, local, nil)
			} else {
				got, want = planJSON(t, targetLocal, remote), planJSON(t, targetLocal, local)
			}
			local.Close()
			if got != want {
				t.Errorf("%s: plan from the remote header\n%s\nwant\n%s", m.Name, got, want)
			}
			if remote.Path != Scheme+repo+"/"+m.Name || remote.Size != m.Size {
				t.Errorf("%s: path %s size %d", m.Name, remote.Path, remote.Size)
			}
			if st.Fetched*4 > st.Size {
				t.Errorf("%s: fetched %d of %d bytes for the header", m.Name, st.Fetched, st.Size)
			}
			t.Logf("%-28s %9d bytes, header read with %7d bytes in %d requests: %5.2f%%", m.Name, st.Size, st.Fetched, st.Requests,
				100*float64(st.Fetched)/float64(st.Size))
			total += st.Size
			fetched += st.Fetched
		}
	}
	t.Logf("all %d demo files: %d of %d bytes (%.2f%%)", 18, fetched, total, 100*float64(fetched)/float64(total))
}

func TestHeaderBadInput(t *testing.T) {
	fx := newFixture(t, "factory-target-Q8_0.gguf")
	ctx := context.Background()
	rf, err := fx.c.Files(ctx, hubtest.TargetRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	m := rf.Models[0]

	small := fx.client(fx.cfg, WithMaxHeader(64<<10))
	if _, _, err := small.Header(ctx, hubtest.TargetRepo, rf.Commit, m); !errors.Is(err, ErrHeaderTooLarge) {
		t.Errorf("header over the cap: %v", err)
	}

	fx.hub.SetFaults(hubtest.Faults{NoRange: true})
	if _, _, err := fx.c.Header(ctx, hubtest.TargetRepo, rf.Commit, m); !errors.Is(err, ErrNoRange) {
		t.Errorf("server without Range: %v", err)
	}

	// A connection dropped mid-range: the rest is asked for again.
	fx.hub.SetFaults(hubtest.Faults{Drops: 2, DropAfter: 1000})
	f, st, err := fx.c.Header(ctx, hubtest.TargetRepo, rf.Commit, m)
	if err != nil || len(f.Tensors) != 91 {
		t.Fatalf("after drops: %v", err)
	}
	if n := len(fx.sleeps.all()); n != 2 || st.Requests < 3 {
		t.Errorf("%d waits, %d requests", n, st.Requests)
	}

	fx.hub.SetFaults(hubtest.Faults{})
	missing := Model{Name: "nope.gguf", Parts: []File{{Path: "nope.gguf", Size: m.Size}}}
	if _, _, err := fx.c.Header(ctx, hubtest.TargetRepo, rf.Commit, missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing file: %v", err)
	}
	// A size larger than the file: the listing lied, the header check says so.
	wrong := m
	wrong.Parts = []File{m.Parts[0]}
	wrong.Parts[0].Size = m.Size / 2
	if _, _, err := fx.c.Header(ctx, hubtest.TargetRepo, rf.Commit, wrong); !errors.Is(err, gguf.ErrTruncated) {
		t.Errorf("size smaller than the tensor data: %v", err)
	}
}

// A split model lists as one model and plans from the headers of its parts
// as the unsplit file does.
func TestSplitModel(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(newFixture(t, "none").models, "factory-target-Q4_K_M.gguf")
	parts, err := hubtest.Split(src, dir, "factory-target-Q4_K_M", 2)
	if err != nil {
		t.Fatal(err)
	}
	repo := hubtest.Repo{ID: "tandem-demo/split-GGUF"}
	for _, p := range parts {
		repo.Files = append(repo.Files, hubtest.RepoFile{Path: "Q4_K_M/" + filepath.Base(p), Local: p})
	}
	fx := serve(t, filepath.Dir(src), repo)
	ctx := context.Background()
	rf, err := fx.c.Files(ctx, repo.ID, "")
	if err != nil || len(rf.Models) != 1 || len(rf.Models[0].Parts) != 2 || rf.Models[0].Quant != "Q4_K_M" {
		t.Fatalf("%+v %v", rf, err)
	}
	remote, _, err := fx.c.Header(ctx, repo.ID, rf.Commit, rf.Models[0])
	if err != nil {
		t.Fatal(err)
	}
	local, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if got, want := planJSON(t, remote, nil), planJSON(t, local, nil); got != want {
		t.Errorf("split plan\n%s\nwant\n%s", got, want)
	}
	ref, _ := ParseRef("hf://tandem-demo/split-GGUF:Q4_K_M")
	p, err := fx.c.Resolve(ctx, ref, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != len(local.Tensors) || !strings.HasSuffix(p, "Q4_K_M/factory-target-Q4_K_M-00001-of-00002.gguf") {
		t.Errorf("pulled %s: %d tensors", p, len(f.Tensors))
	}
	// Any part names the model; a listing with a part missing is unusable.
	if again, err := fx.c.Cached(Ref{Repo: repo.ID, File: "Q4_K_M/factory-target-Q4_K_M-00002-of-00002.gguf"}); err != nil || again != p {
		t.Errorf("cached by part 2: %s %v", again, err)
	}
	half := serve(t, filepath.Dir(src), hubtest.Repo{ID: repo.ID, Files: repo.Files[:1]})
	if _, err := half.c.Files(ctx, repo.ID, ""); !errors.Is(err, ErrNoGGUF) || !strings.Contains(err.Error(), "1 of 2 parts") {
		t.Errorf("split model with a part missing: %v", err)
	}
}
