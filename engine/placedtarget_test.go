package engine

import (
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// placedTarget is the target of the placement tests. They compare a layout
// with one device on the same weights, so any demo target serves; the GPU
// machine, whose carry cannot hold the oracle's 38 MB F16 file, names the
// Q4_K_M one that travels with the repository (packaging/multigpu.sh).
var placedTarget = flag.String("engine.placed-target", "factory-target-F16.gguf", "target the placement tests load, a file in ../shared/models (quantized weights are widened to F16)")

// placedTargetPath is -engine.placed-target, with its quantized weights
// widened to F16 in a file of the test's own. A tensor split adds partial
// sums in another order: with float weights and activations that moves
// logits by float rounding, which the tests' tolerance allows, but with
// quantized activations it can move a rounding step (engine/model's
// TestPlacedQuantized says more), so the tests want float weights.
func placedTargetPath(t *testing.T) string {
	t.Helper()
	src := modelPath(t, *placedTarget)
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	quantized := false
	for _, ti := range f.Tensors {
		quantized = quantized || ti.Type != quant.F32 && ti.Type != quant.F16
	}
	if !quantized {
		return src
	}
	dst := filepath.Join(t.TempDir(), "widened-"+filepath.Base(src))
	if err := widenToF16(f, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// widenToF16 writes f to path with every tensor that is neither F32 nor F16
// stored as F16, and the file type saying so (1, mostly F16).
func widenToF16(f *gguf.File, path string) error {
	var w gguf.Writer
	for _, kv := range f.KV {
		if kv.Key == "general.file_type" {
			kv.Value = uint32(1)
		}
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Type == quant.F32 || ti.Type == quant.F16 {
			data, err := f.TensorData(ti)
			if err != nil {
				return err
			}
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
				return err
			}
			continue
		}
		err := w.AddTensorFunc(ti.Name, quant.F16, ti.Dims, func(out io.Writer) error {
			data, err := f.TensorData(ti)
			if err != nil {
				return err
			}
			v := make([]float32, ti.Elements())
			if err := quant.Dequantize(ti.Type, data, v); err != nil {
				return fmt.Errorf("%s: %w", ti.Name, err)
			}
			b := make([]byte, 2*len(v))
			if err := quant.Quantize(quant.F16, v, b); err != nil {
				return fmt.Errorf("%s: %w", ti.Name, err)
			}
			_, err = out.Write(b)
			return err
		})
		if err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// The widened demo target holds the quantized one's metadata and, tensor by
// tensor, its dequantized weights to F16's precision.
func TestWidenToF16(t *testing.T) {
	f, err := gguf.Open(modelPath(t, "factory-target-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path := filepath.Join(t.TempDir(), "widened.gguf")
	if err := widenToF16(f, path); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.KV) != len(f.KV) || len(g.Tensors) != len(f.Tensors) {
		t.Fatalf("%d keys and %d tensors, want %d and %d", len(g.KV), len(g.Tensors), len(f.KV), len(f.Tensors))
	}
	if ft, _ := g.Uint("general.file_type"); ft != 1 {
		t.Errorf("file type %d, want 1 (mostly F16)", ft)
	}
	widened := 0
	for i := range f.Tensors {
		a, b := &f.Tensors[i], &g.Tensors[i]
		want, got := dequantized(t, f, a), dequantized(t, g, b)
		if a.Type != quant.F32 && a.Type != quant.F16 {
			widened++
			if b.Type != quant.F16 {
				t.Errorf("%s: %v, want F16", b.Name, b.Type)
			}
		}
		for j := range want {
			// F16 keeps 11 significant bits; values under its normal range
			// keep fewer.
			if d := math.Abs(float64(got[j] - want[j])); d > math.Abs(float64(want[j]))/2048+1e-7 {
				t.Fatalf("%s element %d: %v, want %v", b.Name, j, got[j], want[j])
			}
		}
	}
	if widened == 0 {
		t.Error("the Q4_K_M target has no quantized tensor to widen")
	}
}

func dequantized(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	data, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, data, v); err != nil {
		t.Fatal(err)
	}
	return v
}
