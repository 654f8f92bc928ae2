package kernels

import (
	"context"
	"errors"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// testGroup is a ReduceGroup of n members, for Check alone.
type testGroup int

func (g testGroup) Members() []Backend { return make([]Backend, g) }
func (testGroup) Close() error         { return nil }
func (testGroup) Run(context.Context, []Program) error {
	return ErrUnsupported
}

// AllReduce's Check takes a share per member, at least one, each of Dst's
// shape, packed, F32 and apart from Dst; and a group.
func TestAllReduceCheck(t *testing.T) {
	mine, peer := testBuffer(1<<16), testBuffer(1<<16+1)
	x := NewTensor(mine, quant.F32, 2, 64, 0)
	own := NewTensor(mine, quant.F32, 2, 64, 4096)
	other := NewTensor(peer, quant.F32, 2, 64, 0)
	good := AllReduce{Dst: x, A: x, Shares: []Tensor{own, other}, Group: testGroup(2)}
	if err := Check(good); err != nil {
		t.Fatalf("good op: %v", err)
	}
	idle := good
	idle.Shares = []Tensor{{}, other}
	idle.A = Tensor{}
	if err := Check(idle); err != nil {
		t.Errorf("an idle member and no residual: %v", err)
	}
	for name, op := range map[string]AllReduce{
		"no group":          {Dst: x, Shares: []Tensor{own, other}},
		"a share missing":   {Dst: x, Shares: []Tensor{own}, Group: testGroup(2)},
		"no shares":         {Dst: x, Shares: []Tensor{{}, {}}, Group: testGroup(2)},
		"share shape":       {Dst: x, Shares: []Tensor{own, NewTensor(peer, quant.F32, 1, 64, 0)}, Group: testGroup(2)},
		"share type":        {Dst: x, Shares: []Tensor{own, NewTensor(peer, quant.F16, 2, 64, 0)}, Group: testGroup(2)},
		"share is dst":      {Dst: x, Shares: []Tensor{x, other}, Group: testGroup(2)},
		"share not packed":  {Dst: NewTensor(mine, quant.F32, 2, 32, 8192), Shares: []Tensor{NewTensor(peer, quant.F32, 2, 64, 0).ColSlice(0, 32), {}}, Group: testGroup(2)},
		"residual shape":    {Dst: x, A: NewTensor(mine, quant.F32, 2, 32, 8192), Shares: []Tensor{own, other}, Group: testGroup(2)},
		"dst not packed":    {Dst: NewTensor(mine, quant.F32, 2, 128, 8192).ColSlice(0, 64), Shares: []Tensor{own, other}, Group: testGroup(2)},
		"share out of view": {Dst: x, Shares: []Tensor{own, NewTensor(peer, quant.F32, 2, 64, 1<<16)}, Group: testGroup(2)},
	} {
		err := Check(op)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, ErrShape) && !errors.Is(err, ErrType) && !errors.Is(err, ErrOverlap) {
			t.Errorf("%s: %v, want a shape, type or overlap error", name, err)
		}
	}
}
