package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// oracle is ../shared/oracle/oracle.json: HF transformers in float32 on the
// F16 weights.
type oracle struct {
	Prompts []struct {
		Text   string  `json:"text"`
		IDs    []int32 `json:"ids"`
		Target refRun  `json:"target"`
		Draft  refRun  `json:"draft"`
	} `json:"prompts"`
	Window    int       `json:"nll_window"`
	HeldOut   []int32   `json:"held_out_ids"`
	TargetNLL []float64 `json:"target_nll"`
	DraftNLL  []float64 `json:"draft_nll"`
}

type refRun struct {
	Greedy  []int32    `json:"greedy"`
	Teacher teacherRef `json:"teacher"`
}

// teacherRef is a reference's teacher-forced logits: at every position
// of prompt plus continuation, the top ids best first, their logits, and
// the log-sum-exp of the row.
type teacherRef struct {
	TopIDs    [][]int32   `json:"top_ids"`
	TopLogits [][]float64 `json:"top_logits"`
	LogSumExp []float64   `json:"logsumexp"`
}

// teacherTol is issue 4's tolerance on logits: 2e-3 of the largest
// reference logit of the position.
const teacherTol = 2e-3

// check compares row, the logits at position pos of prompt pi, with the
// reference's: every reference top logit and the log-sum-exp within
// teacherTol of the largest reference logit (scale), and the same top-1.
// worst is the largest logit difference relative to scale.
func (r *teacherRef) check(t *testing.T, pi, pos int, row []float32) (scale, worst float64) {
	t.Helper()
	ids, vals := r.TopIDs[pos], r.TopLogits[pos]
	for _, v := range vals {
		scale = max(scale, math.Abs(v))
	}
	tol := teacherTol * scale
	for j, id := range ids {
		d := math.Abs(float64(row[id]) - vals[j])
		worst = max(worst, d/scale)
		if d > tol {
			t.Errorf("prompt %d pos %d: logit of %d = %.5f, reference %.5f (tolerance %.5f)", pi, pos, id, row[id], vals[j], tol)
		}
	}
	if got := argmax(row); got != ids[0] {
		t.Errorf("prompt %d pos %d: top-1 %d, reference %d", pi, pos, got, ids[0])
	}
	if d := math.Abs(logSumExp(row) - r.LogSumExp[pos]); d > tol {
		t.Errorf("prompt %d pos %d: logsumexp %.5f, reference %.5f", pi, pos, logSumExp(row), r.LogSumExp[pos])
	}
	return scale, worst
}

func loadOracle(t *testing.T) *oracle {
	t.Helper()
	data, err := os.ReadFile(sharedtest.Path(t, "oracle", "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o oracle
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return &o
}

// openGGUF opens the GGUF file at path, closed when the test ends.
func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// openModel loads a file from ../shared/models on a CPU backend.
func openModel(t testing.TB, file string, opts Options) *Model {
	t.Helper()
	f := openGGUF(t, sharedtest.Path(t, "models", file))
	be := cpu.New(cpu.Options{})
	m, err := Load(context.Background(), f, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		be.Close()
	})
	return m
}

func allRows(n int) []int {
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	return rows
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func logSumExp(x []float32) float64 {
	m := float64(x[argmax(x)])
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

// topIDs is the k best ids of x, best first.
func topIDs(x []float32, k int) []int32 {
	ids := make([]int32, len(x))
	for i := range ids {
		ids[i] = int32(i)
	}
	sort.SliceStable(ids, func(a, b int) bool { return x[ids[a]] > x[ids[b]] })
	return ids[:k]
}

// TestOracleTeacherForced checks logits at every position of prompt plus
// reference continuation, run as one batch, against the reference: top-1
// equal, every reference logit within 2e-3 of the largest reference logit,
// and the top 8 in the reference's order wherever it separates neighbours by
// more than 1e-3 of that largest logit.
//
// The ordering gap is relative, like the logit tolerance: the oracle itself
// departs from an exact float64 evaluation of the same weights by up to
// 4e-4 of the largest logit (TestFloat64Reference shows ours within 1e-6
// of it), so an absolute 1e-3 gap on logits near 37 would test the oracle's
// rounding rather than this code.
func TestOracleTeacherForced(t *testing.T) {
	o := loadOracle(t)
	for _, tc := range []struct {
		name, file string
		ref        func(i int) refRun
	}{
		{"target", "factory-target-F16.gguf", func(i int) refRun { return o.Prompts[i].Target }},
		{"draft", "factory-draft-F16.gguf", func(i int) refRun { return o.Prompts[i].Draft }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openModel(t, tc.file, Options{Context: 256})
			vocab := m.Params().Vocab
			var worst float64
			for pi, p := range o.Prompts {
				ref := tc.ref(pi)
				seq := append(slices.Clone(p.IDs), ref.Greedy...)
				logits, err := m.Forward(context.Background(), seq, 0, allRows(len(seq)))
				if err != nil {
					t.Fatal(err)
				}
				tops, err := m.ForwardArgmax(context.Background(), seq, 0, allRows(len(seq)))
				if err != nil {
					t.Fatal(err)
				}
				if len(ref.Teacher.TopIDs) != len(seq) {
					t.Fatalf("prompt %d: %d reference positions for %d tokens", pi, len(ref.Teacher.TopIDs), len(seq))
				}
				for pos := range seq {
					row := logits[pos*vocab : (pos+1)*vocab]
					scale, w := ref.Teacher.check(t, pi, pos, row)
					worst = max(worst, w)
					ids, vals := ref.Teacher.TopIDs[pos], ref.Teacher.TopLogits[pos]
					if tops[pos] != ids[0] {
						t.Errorf("prompt %d pos %d: ForwardArgmax %d, reference %d", pi, pos, tops[pos], ids[0])
					}
					mine := topIDs(row, len(ids))
					for j := 0; j+1 < len(ids); j++ {
						if vals[j]-vals[j+1] <= 1e-3*scale {
							continue // a near tie: either order is right
						}
						a, b := slices.Clone(mine[:j+1]), slices.Clone(ids[:j+1])
						slices.Sort(a)
						slices.Sort(b)
						if !slices.Equal(a, b) {
							t.Errorf("prompt %d pos %d: top-%d %v, reference %v", pi, pos, j+1, mine[:j+1], ids[:j+1])
							break
						}
					}
				}
			}
			t.Logf("largest logit error: %.2e of the largest reference logit", worst)
		})
	}
}

// TestOracleGreedy decodes token by token after a batched prompt and must
// reproduce the reference continuation exactly, special tokens included,
// with the argmax taken on the host and where the head runs.
func TestOracleGreedy(t *testing.T) {
	o := loadOracle(t)
	for _, tc := range []struct {
		name, file string
		ref        func(i int) []int32
	}{
		{"target", "factory-target-F16.gguf", func(i int) []int32 { return o.Prompts[i].Target.Greedy }},
		{"draft", "factory-draft-F16.gguf", func(i int) []int32 { return o.Prompts[i].Draft.Greedy }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openModel(t, tc.file, Options{Context: 128})
			for pi, p := range o.Prompts {
				want := tc.ref(pi)
				if got := greedy(t, m, p.IDs, len(want)); !slices.Equal(got, want) {
					t.Errorf("prompt %d:\n got %v\nwant %v", pi, got, want)
				}
				if got := greedyArgmax(t, m, p.IDs, len(want)); !slices.Equal(got, want) {
					t.Errorf("prompt %d, ForwardArgmax:\n got %v\nwant %v", pi, got, want)
				}
			}
		})
	}
}

// greedy prefills prompt as one batch and decodes n tokens one at a time,
// taking the argmax of the logits on the host.
func greedy(t testing.TB, m *Model, prompt []int32, n int) []int32 {
	t.Helper()
	return decode(t, m, prompt, n, func(tokens []int32, pos int) (int32, error) {
		logits, err := m.Forward(context.Background(), tokens, pos, nil)
		if err != nil {
			return 0, err
		}
		return argmax(logits), nil
	})
}

// greedyArgmax is greedy with the argmax taken where the head runs.
func greedyArgmax(t testing.TB, m *Model, prompt []int32, n int) []int32 {
	t.Helper()
	return decode(t, m, prompt, n, func(tokens []int32, pos int) (int32, error) {
		ids, err := m.ForwardArgmax(context.Background(), tokens, pos, nil)
		if err != nil {
			return 0, err
		}
		return ids[0], nil
	})
}

// decode runs prompt, then n tokens one at a time, each the one step chose
// after the pass before.
func decode(t testing.TB, m *Model, prompt []int32, n int, step func(tokens []int32, pos int) (int32, error)) []int32 {
	t.Helper()
	next, err := step(prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for len(out) < n {
		out = append(out, next)
		if next, err = step([]int32{next}, m.Len()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFloat64Reference compares the compiled float32 pass with refModel, a
// float64 evaluation written independently of the kernels, on the longest
// oracle sequence: they must agree to 1e-5 of the largest logit.
func TestFloat64Reference(t *testing.T) {
	o := loadOracle(t)
	p := o.Prompts[2]
	for _, tc := range []struct {
		file string
		ref  refRun
	}{
		{"factory-target-F16.gguf", p.Target},
		{"factory-draft-F16.gguf", p.Draft},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := openModel(t, tc.file, Options{Context: 128})
			seq := append(slices.Clone(p.IDs), tc.ref.Greedy...)
			logits, err := m.Forward(context.Background(), seq, 0, allRows(len(seq)))
			if err != nil {
				t.Fatal(err)
			}
			f := openGGUF(t, sharedtest.Path(t, "models", tc.file))
			want := newRefModel(t, m.Params(), f).logits(seq)
			vocab := m.Params().Vocab
			var worst float64
			for pos, row := range want {
				worst = max(worst, worstDifference(t, logits[pos*vocab:(pos+1)*vocab], row))
			}
			t.Logf("largest difference: %.2e of the largest logit", worst)
			if worst > 1e-5 {
				t.Errorf("float32 pass departs from the float64 reference by %.2e of the largest logit", worst)
			}
		})
	}
}
