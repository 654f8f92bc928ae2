package plan

import (
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Cache types read as llama.cpp's -ctk/-ctv name them, V apart from K or
// not, and the menu offers what every chosen device runs.
func TestKVTypes(t *testing.T) {
	for _, tc := range []struct {
		kv, v string
		want  KVTypes
		err   bool
	}{
		{"", "", SameKV(quant.F16), false},
		{"Q8_0", "", SameKV(quant.Q8_0), false},
		{"q8_0", "q4_0", KVTypes{quant.Q8_0, quant.Q4_0}, false},
		{"f32", "f16", KVTypes{quant.F32, quant.F16}, false},
		{"q4_k", "", KVTypes{}, true},
		{"f16", "iq4_nl", KVTypes{}, true},
	} {
		got, err := ParseKVTypes(tc.kv, tc.v)
		if (err != nil) != tc.err || !tc.err && got != tc.want {
			t.Errorf("%q, %q: %v, %v; want %v (error %v)", tc.kv, tc.v, got, err, tc.want, tc.err)
		}
	}
	if s := (KVTypes{quant.Q8_0, quant.Q4_0}).String(); s != "K q8_0, V q4_0" {
		t.Errorf("String %q", s)
	}
	gpu, cpu := device.Device{Kind: device.CUDA}, device.Device{Kind: device.CPU}
	names := func(ts []quant.Type) (out []string) {
		for _, t := range ts {
			out = append(out, KVTypeName(t))
		}
		return out
	}
	if got := names(KVChoices([]device.Device{cpu})); !slices.Equal(got, []string{"f16", "q8_0", "q4_0", "f32"}) {
		t.Errorf("the CPU offers %v", got)
	}
	if got := names(KVChoices([]device.Device{cpu, gpu})); !slices.Equal(got, []string{"f16", "q8_0", "q4_0", "f32"}) {
		t.Errorf("a CPU and a GPU offer %v", got)
	}
	if !(KVTypes{quant.Q8_0, quant.F16}).RunsOn(device.CUDA) || !(KVTypes{quant.F16, quant.Q4_0}).RunsOn(device.CPU) {
		t.Error("K and V of different types: the CPU and the GPU run them")
	}
	if (KVTypes{quant.Q4_1, quant.F16}).RunsOn(device.CUDA) || (KVTypes{quant.F16, quant.Q5_0}).RunsOn(device.CPU) {
		t.Error("a type no cache offers runs")
	}
}
