package quant_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// sharedDir is the reference data beside the repository (../shared from the
// module root); the test is skipped when it is absent.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	shared := filepath.Join(dir, "..", "shared")
	if _, err := os.Stat(shared); errors.Is(err, os.ErrNotExist) {
		t.Skipf("reference data %s is absent", shared)
	}
	return shared
}

// oracleTensor is one entry of oracle/dequant.json, written by an
// independent dequantizer.
type oracleTensor struct {
	Tensor string    `json:"tensor"`
	Type   string    `json:"type"`
	N      int64     `json:"n"`
	First  []float64 `json:"first"`
	Sum    float64   `json:"sum"`
	SumSq  float64   `json:"sumsq"`
	MaxAbs float64   `json:"maxabs"`
}

func TestDequantizeOracle(t *testing.T) {
	shared := sharedDir(t)
	raw, err := os.ReadFile(filepath.Join(shared, "oracle", "dequant.json"))
	if err != nil {
		t.Fatal(err)
	}
	var oracle map[string][]oracleTensor
	if err := json.Unmarshal(raw, &oracle); err != nil {
		t.Fatal(err)
	}
	models, err := filepath.Glob(filepath.Join(shared, "models", "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(models) == 0 {
		t.Fatal("no models in shared/models")
	}
	for name := range oracle {
		if !slices.Contains(models, filepath.Join(shared, "models", name+".gguf")) {
			t.Errorf("dequant.json lists %s, which is not in shared/models", name)
		}
	}
	for _, path := range models {
		name := filepath.Base(path)
		name = name[:len(name)-len(".gguf")]
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, w := range oracle[name] {
				t.Run(w.Tensor+"/"+w.Type, func(t *testing.T) { checkOracleTensor(t, f, w) })
			}
			// Every other tensor must decode too, whether or not the
			// oracle lists its file.
			for i := range f.Tensors {
				info := &f.Tensors[i]
				data, err := f.TensorData(info)
				if err != nil {
					t.Fatal(err)
				}
				if err := quant.Dequantize(info.Type, data, make([]float32, info.Elements())); err != nil {
					t.Errorf("%s: %v", info.Name, err)
				}
			}
		})
	}
}

func checkOracleTensor(t *testing.T, f *gguf.File, want oracleTensor) {
	info, ok := f.Tensor(want.Tensor)
	if !ok {
		t.Fatalf("tensor %s not in file", want.Tensor)
	}
	if info.Type.String() != want.Type || info.Elements() != want.N {
		t.Fatalf("tensor is %v with %d elements, oracle says %s with %d", info.Type, info.Elements(), want.Type, want.N)
	}
	data, err := f.TensorData(info)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, info.Elements())
	if err := quant.Dequantize(info.Type, data, got); err != nil {
		t.Fatal(err)
	}

	// Every value may differ by 1e-6 of the tensor's scale (the two
	// dequantizers may order the scale multiplications differently).
	eps := 1e-6 * want.MaxAbs
	var worst float64
	for i, w := range want.First {
		worst = max(worst, math.Abs(float64(got[i])-w))
	}
	if worst > eps {
		t.Errorf("first %d values: max abs error %g > %g", len(want.First), worst, eps)
	}

	// Whole-tensor statistics in float64. With each value within eps the
	// sum can move by at most n*eps and the sum of squares by
	// Σ(2|x|eps + eps²); the oracle's own float64 accumulation order adds a
	// relative 1e-12 or so.
	var sum, sumSq, sumAbs, maxAbs float64
	for _, v := range got {
		x := float64(v)
		sum += x
		sumSq += x * x
		sumAbs += math.Abs(x)
		maxAbs = max(maxAbs, math.Abs(x))
	}
	n := float64(len(got))
	checks := []struct {
		what      string
		got, want float64
		tol       float64
	}{
		{"sum", sum, want.Sum, n*eps + 1e-9*sumAbs},
		{"sum of squares", sumSq, want.SumSq, 2*eps*sumAbs + n*eps*eps + 1e-9*sumSq},
		{"max |x|", maxAbs, want.MaxAbs, eps},
	}
	for _, c := range checks {
		if d := math.Abs(c.got - c.want); d > c.tol {
			t.Errorf("%s = %.9g, oracle %.9g (off by %g > %g)", c.what, c.got, c.want, d, c.tol)
		}
	}
	t.Logf("%v n=%d: first-%d max err %.3g (scale %.3g), sum off %.3g, sumsq off %.3g",
		info.Type, len(got), len(want.First), worst, want.MaxAbs,
		math.Abs(sum-want.Sum), math.Abs(sumSq-want.SumSq))
}

// TestOracleCoversWeightTypes guards the oracle test itself: every weight
// type the demo files use must be checked by at least one tensor.
func TestOracleCoversWeightTypes(t *testing.T) {
	shared := sharedDir(t)
	raw, err := os.ReadFile(filepath.Join(shared, "oracle", "dequant.json"))
	if err != nil {
		t.Fatal(err)
	}
	var oracle map[string][]oracleTensor
	if err := json.Unmarshal(raw, &oracle); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, tensors := range oracle {
		for _, w := range tensors {
			seen = append(seen, w.Type)
		}
	}
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1,
		quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K,
		quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
		if !slices.Contains(seen, typ.String()) {
			t.Errorf("no oracle tensor of type %v", typ)
		}
	}
}
