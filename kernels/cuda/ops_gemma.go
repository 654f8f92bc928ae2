package cuda

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// scale launches Dst = X * C (gemma.cu).
func (c *compiler) scale(o kernels.Scale) error {
	x, y, _, err := c.addr3(o.X, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	return c.add(o.Name(), "scale_f32", [3]uint32{ceilDiv(o.X.Cols, 256), uint32(o.X.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(x), argI64(stride(o.X)), argPtr(y), argI64(stride(o.Dst)), argInt(o.X.Cols), argF32(o.C))
}

// windowCaches are the cache types window.cu reads.
var windowCaches = map[quant.Type]string{quant.F32: "f32", quant.F16: "f16"}

// supportsWindow reports whether window.cu has a kernel for o's caches.
func supportsWindow(o kernels.Attention) bool {
	_, kOK := windowCaches[o.K.Type]
	_, vOK := windowCaches[o.V.Type]
	return kOK && vOK
}

// windowSupported is what Compile refuses of a sliding-window attention
// that kernels.Check passed.
func windowSupported(o kernels.Attention) error {
	if !supportsWindow(o) {
		return fmt.Errorf("%w: sliding-window attention over K %v, V %v caches (F32 or F16)", kernels.ErrUnsupported, o.K.Type, o.V.Type)
	}
	if o.HeadDim%32 != 0 || o.HeadDim > 256 {
		return fmt.Errorf("%w: head size %d (multiples of 32 up to 256)", kernels.ErrUnsupported, o.HeadDim)
	}
	return nil
}

// windowAttention launches attention_window_<k>_<v> (window.cu): one
// block of 4 warps per (query head, row), over the row's window of keys
// as its position on the device gives it.
func (c *compiler) windowAttention(o kernels.Attention) error {
	q, k, v, err := c.addr3(o.Q, o.K, o.V)
	if err != nil {
		return err
	}
	pos, y, _, err := c.addr3(o.Pos, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	kernel := "attention_window_" + windowCaches[o.K.Type] + "_" + windowCaches[o.V.Type]
	return c.add(o.Name(), kernel, [3]uint32{uint32(o.NHead), uint32(o.Q.Rows), 1}, [3]uint32{128, 1, 1}, 0,
		argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(stride(o.K)), argPtr(v), argI64(stride(o.V)),
		argPtr(pos), argPtr(y), argI64(stride(o.Dst)), argInt(o.NHead), argInt(o.NKVHead), argInt(o.HeadDim),
		argF32(o.Scale), argInt(o.Window))
}
