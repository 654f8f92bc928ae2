package model

import (
	"context"
	"errors"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/backendtest"
	"github.com/tandem-run/tandem/kernels/cpu"
)

// familyBackend is where the family oracle tests load the fixtures: the
// GPU machine runs them with -model.backend=cuda.
var familyBackend = flag.String("model.backend", "cpu", "backend the family oracle tests load the fixtures on: cpu or cuda")

// newFamilyBackend opens -model.backend's backend.
func newFamilyBackend(t *testing.T) kernels.Backend {
	t.Helper()
	return backendtest.Open(t, "model.backend", *familyBackend)
}

// familyOracle is testdata/<fixture>-oracle.json, made with
// packaging/tools/familyfixtures.py: transformers in float32 on the tiny
// random-weight models that packaging/tools/hfconvert turned into
// testdata/<fixture>.gguf. To make them again (torch and transformers 5
// where the script runs):
//
//	python3 packaging/tools/familyfixtures.py OUT
//	go run ./packaging/tools/hfconvert -in OUT/qwen3moe -vocab ../shared/models/factory-target-F16.gguf \
//		-type F16 -name "qwen3moe tiny random (issue 22)" -o engine/model/testdata/qwen3moe-tiny-F16.gguf
//	cp OUT/qwen3moe/oracle.json engine/model/testdata/qwen3moe-tiny-F16-oracle.json
//
// and the same for gemma3.
type familyOracle struct {
	Greedy []struct {
		PromptIDs []int32 `json:"prompt_ids"`
		GreedyIDs []int32 `json:"greedy_ids"`
	} `json:"greedy"`
	Prompts []struct {
		IDs      []int32              `json:"ids"`
		Greedy   []int32              `json:"greedy"`
		Teacher  teacherRef           `json:"teacher"`
		FullRows map[string][]float64 `json:"full_rows"`
	} `json:"prompts"`
}

// familyFixtures are the architectures of issue 22 with their fixtures.
var familyFixtures = []string{"qwen3moe-tiny-F16", "gemma3-tiny-F16"}

// openFixture loads testdata/<name>.gguf on -model.backend's backend
// with its oracle.
func openFixture(t *testing.T, name string) (*Model, *familyOracle) {
	t.Helper()
	f := openGGUF(t, filepath.Join("testdata", name+".gguf"))
	be := newFamilyBackend(t)
	m, err := Load(context.Background(), f, be, Options{Context: 256})
	if err != nil {
		be.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		be.Close()
	})
	var o familyOracle
	readJSON(t, filepath.Join("testdata", name+"-oracle.json"), &o)
	if len(o.Prompts) == 0 || len(o.Greedy) != len(o.Prompts) {
		t.Fatalf("%s oracle: %d prompts, %d greedy runs", name, len(o.Prompts), len(o.Greedy))
	}
	return m, &o
}

// TestFamilyOracleTeacherForced checks the logits of prompt plus reference
// continuation, run as one batch, at every position: top-1 equal to
// transformers', every reference top-8 logit and the logsumexp within
// issue 4's 2e-3 of the largest reference logit, and the whole rows the
// oracle keeps within it too.
func TestFamilyOracleTeacherForced(t *testing.T) {
	for _, name := range familyFixtures {
		t.Run(name, func(t *testing.T) {
			m, o := openFixture(t, name)
			vocab := m.Params().Vocab
			var worst float64
			for pi, p := range o.Prompts {
				seq := append(slices.Clone(p.IDs), p.Greedy...)
				if len(p.Teacher.TopIDs) != len(seq) {
					t.Fatalf("prompt %d: %d reference positions for %d tokens", pi, len(p.Teacher.TopIDs), len(seq))
				}
				logits, err := m.Forward(context.Background(), seq, 0, allRows(len(seq)))
				if err != nil {
					t.Fatal(err)
				}
				for pos := range seq {
					row := logits[pos*vocab : (pos+1)*vocab]
					scale, w := p.Teacher.check(t, pi, pos, row)
					worst = max(worst, w)
					if full, ok := p.FullRows[strconv.Itoa(pos)]; ok {
						for id, v := range full {
							d := math.Abs(float64(row[id]) - v)
							worst = max(worst, d/scale)
							if d > teacherTol*scale {
								t.Errorf("prompt %d pos %d: logit of %d = %.5f, reference %.5f (full row)", pi, pos, id, row[id], v)
								break
							}
						}
					}
				}
			}
			t.Logf("largest logit error on %s: %.2e of the largest reference logit", *familyBackend, worst)
		})
	}
}

// TestFamilyOracleGreedy decodes 48 tokens token by token after a batched
// prompt, the argmax taken where the head runs: exactly transformers'.
func TestFamilyOracleGreedy(t *testing.T) {
	for _, name := range familyFixtures {
		t.Run(name, func(t *testing.T) {
			m, o := openFixture(t, name)
			for pi, g := range o.Greedy {
				got := greedyArgmax(t, m, g.PromptIDs, len(g.GreedyIDs))
				if !slices.Equal(got, g.GreedyIDs) {
					t.Errorf("prompt %d: greedy %v, reference %v", pi, got, g.GreedyIDs)
				}
			}
		})
	}
}

// noOp is a CPU backend that lacks one op, as a backend without the MoE,
// GeGLU, Scale or sliding-window kernels would.
type noOp struct {
	kernels.Backend
	lacks string // an op name
	win   bool   // or sliding-window attention
}

func (b noOp) Supports(op kernels.Op) bool {
	if a, ok := op.(kernels.Attention); ok && b.win && a.Window > 0 {
		return false
	}
	return op.Name() != b.lacks && b.Backend.Supports(op)
}

// TestFamilyOpsRefused: a device without an op a family needs is refused
// at load, naming it, before anything is placed.
func TestFamilyOpsRefused(t *testing.T) {
	for _, c := range []struct {
		fixture string
		be      noOp
		says    string
	}{
		{"qwen3moe-tiny-F16", noOp{lacks: "moe"}, "moe"},
		{"gemma3-tiny-F16", noOp{lacks: "geglu"}, "geglu"},
		{"gemma3-tiny-F16", noOp{lacks: "scale"}, "scale"},
		{"gemma3-tiny-F16", noOp{win: true}, "sliding-window attention"},
	} {
		f, err := gguf.Open(filepath.Join("testdata", c.fixture+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		cpuBe := cpu.New(cpu.Options{Threads: 1})
		c.be.Backend = cpuBe
		m, err := Load(context.Background(), f, c.be, Options{Context: 64})
		if err == nil {
			m.Close()
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s without %s: %v", c.fixture, c.says, err)
		}
		if u := cpuBe.Usage(); len(u) != 0 {
			for l, n := range u {
				if n != 0 {
					t.Errorf("%s without %s: %d bytes of %v left allocated", c.fixture, c.says, n, l)
				}
			}
		}
		cpuBe.Close()
		f.Close()
	}
}
