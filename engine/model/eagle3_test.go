package model

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// eagle3Pair is the F16 demo target and an EAGLE-3 draft on one CPU
// device, as one plan, with the captured target states kept on the host
// for the reference.
type eagle3Pair struct {
	target *Model
	draft  *Eagle3
	tf, df *gguf.File
	states [][]float64 // per position: the concatenated captured block inputs
}

// loadEagle3Pair plans and loads the pair with a context of 128 and the
// given batch (0: the planner's), F32 caches.
func loadEagle3Pair(t testing.TB, draftPath string, batch int) (*eagle3Pair, error) {
	t.Helper()
	pr := &eagle3Pair{}
	pr.tf, pr.df = openDemoPair(t, draftPath)
	ep, err := ReadEagle3Params(pr.df)
	if err != nil {
		return nil, err
	}
	be := cpu.New(cpu.Options{})
	t.Cleanup(func() { be.Close() })
	backends := map[int]kernels.Backend{0: be}
	p, target, err := loadDemoTarget(t, pr.tf, pr.df, batch, backends)
	if err != nil {
		return nil, err
	}
	pr.target = target
	if pr.draft, err = LoadEagle3(context.Background(), pr.df, pr.tf, p, p.Draft, pr.target, backends, nil); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := pr.draft.Close(); err != nil {
			t.Error(err)
		}
	})
	// The draft receives the states in its features buffer; keep a copy
	// of each chunk before it is fused.
	features := pr.draft.s.hidden
	err = pr.target.Capture(ep.TargetLayers, be, features, func(pos, n int) error {
		host := make([]float32, n*features.Cols)
		if err := be.Read(kernels.F32Bytes(host), features.RowSlice(0, n)); err != nil {
			return err
		}
		for i := range n {
			row := make([]float64, features.Cols)
			for j := range row {
				row[j] = float64(host[i*features.Cols+j])
			}
			pr.states = append(pr.states[:pos+i], row)
		}
		return pr.draft.Encode(context.Background(), pos, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return pr, nil
}

// openDemoPair opens the F16 demo target and the draft at draftPath, both
// closed when the test ends.
func openDemoPair(t testing.TB, draftPath string) (tf, df *gguf.File) {
	t.Helper()
	return openGGUF(t, sharedtest.Path(t, "models", "factory-target-F16.gguf")), openGGUF(t, draftPath)
}

// loadDemoTarget plans target tf with draft df on one CPU device (backends
// has it as device 0) with a context of 128 and batch (0: the planner's),
// and loads the target (closed when the test ends).
func loadDemoTarget(t testing.TB, tf, df *gguf.File, batch int, backends map[int]kernels.Backend) (*plan.Plan, *Model, error) {
	t.Helper()
	p, err := plan.Make(plan.Input{Target: tf, Draft: df, Devices: []device.Device{oneCPU()}, Ctx: 128, Batch: batch})
	if err != nil {
		return nil, nil, err
	}
	target, err := LoadPlan(context.Background(), tf, p, &p.Target, backends, nil)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { target.Close() })
	return p, target, nil
}

// oneCPU is a CPU device of unbounded memory, for one-device plans.
func oneCPU() device.Device {
	return device.Device{Kind: device.CPU, Name: "cpu", Virtual: true, Physical: -1, MemoryTotal: 1 << 40}
}

func demoEagle3(t testing.TB) string { return sharedtest.Path(t, "models", "factory-eagle3-F16.gguf") }

// demoSequence is the first oracle prompt and the target's continuation.
func demoSequence(t *testing.T) []int32 {
	o := loadOracle(t)
	return append(slices.Clone(o.Prompts[0].IDs), o.Prompts[0].Target.Greedy...)
}

// draftRun drives a pair as the engine does: the target runs seq[:n], the
// draft catches up on every position the target ran and then drafts the
// given tokens one at a time; it returns the logits of each draft call.
func (pr *eagle3Pair) draftRun(t *testing.T, seq []int32, n int, drafted []int32) [][]float32 {
	t.Helper()
	ctx := context.Background()
	if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
		t.Fatal(err)
	}
	logits, err := pr.draft.Forward(ctx, seq[1:n+1], 0)
	if err != nil {
		t.Fatal(err)
	}
	out := [][]float32{slices.Clone(logits)}
	for i, tok := range drafted {
		if logits, err = pr.draft.Step(ctx, tok, n+i); err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(logits))
	}
	return out
}

// worstDifference compares logits with the reference relative to the
// largest reference logit; -Inf must match -Inf.
func worstDifference(t *testing.T, got []float32, want []float64) float64 {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		if !math.IsInf(v, -1) {
			scale = max(scale, math.Abs(v))
		}
	}
	var worst float64
	for i, v := range want {
		if math.IsInf(v, -1) || math.IsInf(float64(got[i]), -1) {
			if !math.IsInf(v, -1) || !math.IsInf(float64(got[i]), -1) {
				t.Fatalf("logit %d: %v, reference %v", i, got[i], v)
			}
			continue
		}
		worst = max(worst, math.Abs(float64(got[i])-v)/scale)
	}
	return worst
}

// The draft's logits, as it catches up on the target's states and then
// drafts on its own, equal a float64 evaluation written from the
// description in ../shared/models/README.md; and after the target rolls
// back and runs other tokens, the draft follows it.
func TestEagle3MatchesReference(t *testing.T) {
	seq := demoSequence(t)
	for _, tc := range []struct {
		name  string
		batch int // both models' batch: chunked runs when small
	}{{"one pass", 0}, {"chunks", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := loadEagle3Pair(t, demoEagle3(t), tc.batch)
			if err != nil {
				t.Fatal(err)
			}
			n := 24
			drafted := seq[n+1 : n+4]
			got := pr.draftRun(t, seq, n, drafted)
			want := pr.reference(t, seq[1:n+1], drafted)
			var worst float64
			for i := range got {
				worst = max(worst, worstDifference(t, got[i], want[i]))
			}
			t.Logf("largest difference: %.2e of the largest logit", worst)
			if worst > 1e-5 {
				t.Errorf("draft departs from the float64 reference by %.2e of the largest logit", worst)
			}

			// Roll back: the target reruns from n-3 with other tokens, as after
			// a rejected draft; the draft catches up from there.
			ctx := context.Background()
			other := slices.Clone(seq[:n+6])
			other[n-1], other[n+1] = seq[n+10], seq[n+11]
			if _, err := pr.target.Forward(ctx, other[n-3:n+4], n-3, nil); err != nil {
				t.Fatal(err)
			}
			if pr.draft.Len() > n-3 {
				t.Errorf("draft cache holds %d positions after the target re-ran from %d", pr.draft.Len(), n-3)
			}
			logits, err := pr.draft.Forward(ctx, other[n-2:n+5], n-3)
			if err != nil {
				t.Fatal(err)
			}
			again := pr.reference(t, other[1:n+5], nil)
			if d := worstDifference(t, logits, again[0]); d > 1e-5 {
				t.Errorf("after rollback the draft departs from the reference by %.2e", d)
			}
		})
	}
}

// The optional parts of the format: a draft with its own embedding and head
// (copies of the target's) drafts exactly as the borrowing one; one with a
// reduced vocabulary and a d2t map gives the same logits on the ids it
// maps and -Inf elsewhere; the normalisation switches follow the reference.
func TestEagle3Variants(t *testing.T) {
	seq := demoSequence(t)
	n := 20
	drafted := seq[n+1 : n+3]
	base, err := loadEagle3Pair(t, demoEagle3(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := base.draftRun(t, seq, n, drafted)
	if got := base.draft.Borrowed(); !slices.Equal(got, []string{"token_embd.weight", "output.weight"}) {
		t.Errorf("demo draft borrows %v", got)
	}

	tf := base.tf
	tensor := func(name string) (*gguf.TensorInfo, []byte) {
		info, _ := tf.Tensor(name)
		data, err := tf.TensorData(info)
		if err != nil {
			t.Fatal(err)
		}
		return info, data
	}
	embd, embdData := tensor("token_embd.weight")
	head, headData := tensor("output.weight")

	t.Run("own embedding and head", func(t *testing.T) {
		path := draftVariant(t, demoEagle3(t), nil,
			rawTensor{"token_embd.weight", embd.Type, embd.Dims, embdData},
			rawTensor{"output.weight", head.Type, head.Dims, headData})
		pr, err := loadEagle3Pair(t, path, 0)
		if err != nil {
			t.Fatal(err)
		}
		if b := pr.draft.Borrowed(); len(b) != 0 {
			t.Errorf("borrows %v", b)
		}
		for i, got := range pr.draftRun(t, seq, n, drafted) {
			if !slices.Equal(got, want[i]) {
				t.Errorf("call %d: logits differ from the borrowing draft's", i)
			}
		}
	})

	t.Run("d2t", func(t *testing.T) {
		path, ids := eagle3D2TVariant(t, tf)
		pr, err := loadEagle3Pair(t, path, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v := pr.draft.Params().Vocab; v != len(ids) {
			t.Errorf("draft vocabulary %d, want %d", v, len(ids))
		}
		mapped := map[int]bool{}
		for _, id := range ids {
			mapped[int(id)] = true
		}
		for i, got := range pr.draftRun(t, seq, n, drafted) {
			for id, v := range got {
				if mapped[id] && v != want[i][id] || !mapped[id] && !math.IsInf(float64(v), -1) {
					t.Fatalf("call %d, id %d: %v, borrowing draft %v (mapped %v)", i, id, v, want[i][id], mapped[id])
				}
			}
		}
	})

	t.Run("norms", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 9))
		width := 3 * int(embd.Dims[0])
		norm := make([]float32, width)
		for i := range norm {
			norm[i] = float32(1 + 0.3*rng.NormFloat64())
		}
		path := draftVariant(t, demoEagle3(t), map[string]any{"eagle3.norm_before_fc": true, "eagle3.norm_before_residual": true},
			rawTensor{"enc.output_norm.weight", quant.F32, []int64{int64(width)}, kernels.F32Bytes(norm)})
		pr, err := loadEagle3Pair(t, path, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := pr.draft.Params()
		if !p.NormBeforeFC || !p.NormBeforeResidual {
			t.Fatalf("switches not read: %+v", p)
		}
		got := pr.draftRun(t, seq, n, drafted)
		ref := pr.reference(t, seq[1:n+1], drafted)
		var worst float64
		for i := range got {
			worst = max(worst, worstDifference(t, got[i], ref[i]))
		}
		if worst > 1e-5 {
			t.Errorf("departs from the reference by %.2e", worst)
		}
		if slices.Equal(got[0], want[0]) {
			t.Error("the switches changed nothing")
		}
	})
}

// errPlan stands for a refusal by the planner in TestEagle3LoadErrors.
var errPlan = errors.New("refused by the planner")

// Drafts that cannot serve the target are refused with the reason: by the
// planner where the plan cannot be made (it reads the same headers), else
// by LoadEagle3.
func TestEagle3LoadErrors(t *testing.T) {
	ids := func(v ...int64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	head := func(rows int64) rawTensor {
		return rawTensor{"output.weight", quant.F32, []int64{384, rows}, make([]byte, 4*384*rows)}
	}
	d2t := func(v ...int64) rawTensor { return rawTensor{"d2t", quant.I64, []int64{int64(len(v))}, ids(v...)} }
	for _, tc := range []struct {
		name  string
		kv    map[string]any
		extra []rawTensor
		want  error
	}{
		{"two layers", map[string]any{"eagle3.block_count": uint32(2)}, nil, ErrUnsupported},
		{"no target layers", map[string]any{"eagle3.target_layers": []int32{}}, nil, ErrMissing},
		{"wide target", map[string]any{"eagle3.target_hidden_size": uint32(512)}, nil, errPlan},
		{"block past the target", map[string]any{"eagle3.target_layers": []int32{2, 4, 9}}, nil, errPlan},
		{"norm_before_fc without its weight", map[string]any{"eagle3.norm_before_fc": true}, nil, ErrMissing},
		{"d2t without a head", nil, []rawTensor{d2t(5, 7)}, ErrMissing},
		{"d2t out of range", nil, []rawTensor{head(2), d2t(5, 9000)}, ErrBadParam},
		{"d2t repeats an id", nil, []rawTensor{head(2), d2t(5, 5)}, ErrBadParam},
		{"head of another vocabulary", nil, []rawTensor{head(2)}, ErrShape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := draftVariant(t, demoEagle3(t), tc.kv, tc.extra...)
			_, err := loadEagle3Pair(t, path, 0)
			if tc.want == errPlan && (err == nil || !strings.HasPrefix(err.Error(), "plan: ")) || tc.want != errPlan && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// The draft refuses to run past the states it holds.
func TestEagle3Positions(t *testing.T) {
	pr, err := loadEagle3Pair(t, demoEagle3(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seq := demoSequence(t)
	if _, err := pr.draft.Forward(ctx, seq[1:3], 0); !errors.Is(err, ErrPosition) {
		t.Errorf("forward with no target states: %v", err)
	}
	if _, err := pr.target.Forward(ctx, seq[:4], 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.draft.Forward(ctx, seq[1:6], 0); !errors.Is(err, ErrPosition) {
		t.Errorf("forward past the target's states: %v", err)
	}
	if _, err := pr.draft.Forward(ctx, []int32{-1}, 0); !errors.Is(err, ErrToken) {
		t.Errorf("bad token: %v", err)
	}
	if _, err := pr.draft.Step(ctx, seq[1], 0); !errors.Is(err, ErrPosition) {
		t.Errorf("step with no state of the draft's own: %v", err)
	}
	// The four positions the target ran, then two drafted ones.
	if _, err := pr.draft.Forward(ctx, seq[1:5], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.draft.Step(ctx, seq[5], 5); !errors.Is(err, ErrPosition) {
		t.Errorf("step past a gap: %v", err)
	}
	for pos := 4; pos < 6; pos++ {
		if _, err := pr.draft.Step(ctx, seq[pos+1], pos); err != nil {
			t.Fatalf("step at %d: %v", pos, err)
		}
	}
	if err := pr.draft.Truncate(7); !errors.Is(err, ErrPosition) {
		t.Errorf("truncate past the cache: %v", err)
	}
	// Drafted states are the draft's own: the target's stay as they were.
	if err := pr.draft.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.draft.Forward(ctx, seq[3:5], 2); err != nil {
		t.Errorf("forward on the target's states after drafting: %v", err)
	}
}

// rawTensor is a tensor to write into a draft variant.
type rawTensor struct {
	name string
	typ  quant.Type
	dims []int64
	data []byte
}

// eagle3D2TVariant writes the demo draft with a reduced vocabulary of its
// own: every third target id, backwards (so draft and target ids differ
// in order too), the head rows copied from the target tf's.
func eagle3D2TVariant(t *testing.T, tf *gguf.File) (string, []int64) {
	t.Helper()
	head, _ := tf.Tensor("output.weight")
	headData, err := tf.TensorData(head)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for id := int64(head.Dims[1]) - 1; id >= 0; id -= 3 {
		ids = append(ids, id)
	}
	rowBytes := len(headData) / int(head.Dims[1])
	var rows, d2t []byte
	for _, id := range ids {
		rows = append(rows, headData[int(id)*rowBytes:int(id+1)*rowBytes]...)
		d2t = binary.LittleEndian.AppendUint64(d2t, uint64(id))
	}
	return draftVariant(t, demoEagle3(t), nil,
		rawTensor{"output.weight", head.Type, []int64{head.Dims[0], int64(len(ids))}, rows},
		rawTensor{"d2t", quant.I64, []int64{int64(len(ids))}, d2t}), ids
}

// draftVariant writes a copy of the draft at src with metadata overridden
// by kv and the extra tensors added (replacing any of the same name).
func draftVariant(t *testing.T, src string, kv map[string]any, extra ...rawTensor) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w gguf.Writer
	for _, e := range f.KV {
		if v, ok := kv[e.Key]; ok {
			e.Value = v
		}
		w.AddKV(e.Key, e.Value)
	}
	for k, v := range kv {
		if _, ok := f.Get(k); !ok {
			w.AddKV(k, v)
		}
	}
	tensors := extra
	for _, info := range f.Tensors {
		if slices.ContainsFunc(extra, func(r rawTensor) bool { return r.name == info.Name }) {
			continue
		}
		data, err := f.TensorData(&info)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, rawTensor{info.Name, info.Type, info.Dims, data})
	}
	for _, r := range tensors {
		if err := w.AddTensor(r.name, r.typ, r.dims, r.data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// reference evaluates the draft in float64 on the pair's captured target
// states: positions 0.. take (tokens[p], fc(states[p])) while target states
// last, then each drafted token with the previous position's pre-norm
// state. It returns the logits of the last caught-up position and of each
// drafted one, over target ids.
func (pr *eagle3Pair) reference(t *testing.T, tokens, drafted []int32) [][]float64 {
	t.Helper()
	p := pr.draft.Params()
	d := newRefModel(t, p.Params, pr.df)
	tgt := newRefModel(t, pr.target.Params(), pr.tf)
	w := func(name string) []float64 {
		if v := d.tensor(name); v != nil {
			return v
		}
		return tgt.tensor(name) // borrowed
	}
	eps := float64(p.NormEps)
	var d2t []int32
	if info, ok := pr.df.Tensor("d2t"); ok {
		data, _ := pr.df.TensorData(info)
		for i := range info.Dims[0] {
			d2t = append(d2t, int32(binary.LittleEndian.Uint64(data[8*i:])))
		}
	}
	var ks, vs [][]float64
	var g []float64
	var out [][]float64
	step := func(pos int, tok int32) {
		e := w("token_embd.weight")[int(tok)*p.Embd : (int(tok)+1)*p.Embd]
		gn := rmsnorm(g, w("blk.0.attn_norm_2.weight"), eps)
		in := append(rmsnorm(e, w("blk.0.attn_norm.weight"), eps), gn...)
		q, k, v := matvec(w("blk.0.attn_q.weight"), in), matvec(w("blk.0.attn_k.weight"), in), matvec(w("blk.0.attn_v.weight"), in)
		d.rope(q, pos)
		d.rope(k, pos)
		ks, vs = append(ks, k), append(vs, v)
		attn := make([]float64, p.Heads*p.HeadDim)
		for h := range p.Heads {
			kv := h / (p.Heads / p.KVHeads)
			scores := make([]float64, len(ks))
			m := math.Inf(-1)
			for j := range ks {
				var s float64
				for c := range p.HeadDim {
					s += q[h*p.HeadDim+c] * ks[j][kv*p.HeadDim+c]
				}
				scores[j] = s / math.Sqrt(float64(p.HeadDim))
				m = max(m, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - m)
				sum += scores[j]
			}
			for j, s := range scores {
				for c := range p.HeadDim {
					attn[h*p.HeadDim+c] += s / sum * vs[j][kv*p.HeadDim+c]
				}
			}
		}
		x := matvec(w("blk.0.attn_output.weight"), attn)
		res := g
		if p.NormBeforeResidual {
			res = gn
		}
		for i := range x {
			x[i] += res[i]
		}
		h := rmsnorm(x, w("blk.0.ffn_norm.weight"), eps)
		gate, up := matvec(w("blk.0.ffn_gate.weight"), h), matvec(w("blk.0.ffn_up.weight"), h)
		for i := range gate {
			gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
		}
		for i, v := range matvec(w("blk.0.ffn_down.weight"), gate) {
			x[i] += v
		}
		g = x // the next position's state
		logits := matvec(w("output.weight"), rmsnorm(x, w("output_norm.weight"), eps))
		if d2t != nil {
			full := make([]float64, pr.target.Params().Vocab)
			for i := range full {
				full[i] = math.Inf(-1)
			}
			for i, id := range d2t {
				full[id] = logits[i]
			}
			logits = full
		}
		out = append(out, logits)
	}
	for pos, tok := range tokens {
		x := pr.states[pos]
		if p.NormBeforeFC {
			x = rmsnorm(x, w("enc.output_norm.weight"), eps)
		}
		g = matvec(w("fc.weight"), x)
		step(pos, tok)
	}
	out = out[len(out)-1:]
	for i, tok := range drafted {
		step(len(tokens)+i, tok)
	}
	return out
}

// BenchmarkEagle3Draft times one drafted token: the decoder layer and the
// borrowed head, reporting tokens/s and weight bytes streamed per second.
func BenchmarkEagle3Draft(b *testing.B) {
	pr, err := loadEagle3Pair(b, demoEagle3(b), 0)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	prompt := []int32{1, 7570, 203, 5139, 1372, 368, 280, 285, 198}
	if _, err := pr.target.Forward(ctx, prompt[:8], 0, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := pr.draft.Forward(ctx, prompt[1:], 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(pr.draft.weightBytes())
	b.ResetTimer()
	for i := range b.N {
		pos := 8 + i%100
		if pos == 8 {
			if err := pr.draft.Truncate(7); err != nil {
				b.Fatal(err)
			}
			if _, err := pr.draft.Forward(ctx, prompt[8:], 7); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := pr.draft.Step(ctx, int32(i%100), pos); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// A draft with its own reduced head computes a sampled step's distribution
// over its rows on its device (ForwardProbsRows, StepProbsRows): the
// softmax at the temperature of the logits ForwardRows and StepRows return,
// here taken in float64 on the host, within 1e-5 of the largest
// probability and summing to 1. A draft that borrows the target's head
// has no such rows, and a temperature of 0 has no distribution: errors.
func TestEagle3ProbsRows(t *testing.T) {
	seq := demoSequence(t)
	n := 20
	base, err := loadEagle3Pair(t, demoEagle3(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := base.draft.ProbsOnDevice(); ok {
		t.Error("a draft borrowing the target's head reports rows of its own")
	}
	path, _ := eagle3D2TVariant(t, base.tf)
	pr, err := loadEagle3Pair(t, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pr.draft.ProbsOnDevice(); !ok {
		t.Fatal("a draft with its own reduced head on the CPU cannot compute its rows' softmax")
	}
	ctx := context.Background()
	if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
		t.Fatal(err)
	}
	const temp = 0.7
	var logits [2][]float32
	l, err := pr.draft.ForwardRows(ctx, seq[1:n+1], 0)
	if err != nil {
		t.Fatal(err)
	}
	logits[0] = slices.Clone(l)
	if l, err = pr.draft.StepRows(ctx, seq[n+1], n); err != nil {
		t.Fatal(err)
	}
	logits[1] = slices.Clone(l)
	for step, want := range logits {
		var got []float32
		if step == 0 {
			got, err = pr.draft.ForwardProbsRows(ctx, seq[1:n+1], 0, temp)
		} else {
			got, err = pr.draft.StepProbsRows(ctx, seq[n+1], n, temp)
		}
		if err != nil {
			t.Fatal(err)
		}
		maxv := float64(slices.Max(want))
		ref := make([]float64, len(want))
		var sum float64
		for i, v := range want {
			ref[i] = math.Exp((float64(v) - maxv) / temp)
			sum += ref[i]
		}
		var worst, total float64
		for i := range ref {
			ref[i] /= sum
			worst = max(worst, math.Abs(float64(got[i])-ref[i]))
			total += float64(got[i])
		}
		if worst > 1e-5*slices.Max(ref) || math.Abs(total-1) > 1e-5 {
			t.Errorf("step %d: largest difference %.2e from the logits' softmax (largest probability %.3f), sum %.7f", step, worst, slices.Max(ref), total)
		}
	}
	if _, err := pr.draft.ForwardProbsRows(ctx, seq[1:n+1], 0, 0); !errors.Is(err, ErrBadParam) {
		t.Errorf("temperature 0: %v, want ErrBadParam", err)
	}
	if _, err := base.draft.ForwardProbsRows(ctx, seq[1:n+1], 0, temp); !errors.Is(err, ErrBadParam) {
		t.Errorf("borrowed head: %v, want ErrBadParam", err)
	}
}
