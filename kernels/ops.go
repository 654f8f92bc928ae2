package kernels

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels/quant"
)

// Op is one step of a program: one of the structs below. Shapes are
// [rows, cols]; B is the number of tokens in the batch. Activations are F32,
// token ids and positions I32. Unless an op says otherwise its Dst may be
// one of its inputs (in place) but must not partly overlap one.
type Op interface {
	// Name is the op's name in messages ("mat_mul").
	Name() string
	check() error
}

// Check validates an op's operands: shapes agree, types are ones the op is
// defined for, and every view lies inside its buffer. Backends call it from
// Compile, so the shape rules live in one place.
func Check(op Op) error {
	if err := op.check(); err != nil {
		return fmt.Errorf("kernels: %s: %w", op.Name(), err)
	}
	return nil
}

// GetRows gathers rows, converting to F32: Dst[i] = Src[Idx[i]]. This is the
// token-embedding lookup (Src a weight matrix of any type) and the selection
// of the rows whose logits are wanted (Src F32).
//
//	Src [n, cols]  Idx I32 [1, B]  Dst F32 [B, cols]
type GetRows struct{ Dst, Src, Idx Tensor }

// SetRows scatters rows, converting from F32: Dst[Idx[i]] = Src[i]. This is
// the KV-cache write at the batch's positions. A quantized Dst (a Q8_0 or
// Q4_0 cache) gets each row as kernels/quant's quantizer for its type
// writes it (quant.Quantize: ggml's rounding), block by block of 32 along
// the row, so every backend stores the same bytes.
//
//	Src F32 [B, cols]  Idx I32 [1, B]  Dst F32|F16|Q8_0|Q4_0 [n, cols]
type SetRows struct{ Dst, Src, Idx Tensor }

// MatMul multiplies activations by a weight matrix stored row by row, as
// GGUF stores it: Dst[b][o] = sum_i X[b][i] * W[o][i]. W may be any weight
// type the backend supports; the products are computed on its blocks.
//
//	W [n_out, n_in]  X F32 [B, n_in]  Dst F32 [B, n_out] (must not overlap X)
type MatMul struct{ Dst, W, X Tensor }

// RMSNorm normalises each row and scales it by W:
// Dst[b] = X[b] / sqrt(mean(X[b]^2) + Eps) * W.
//
//	X F32 [B, n]  W F32 [1, n]  Dst F32 [B, n]
type RMSNorm struct {
	Dst, X, W Tensor
	Eps       float32
}

// Add is Dst = A + B, elementwise; B may be one row broadcast over A's rows
// (a bias).
//
//	A F32 [B, n]  B F32 [B, n] | [1, n]  Dst F32 [B, n]
type Add struct{ Dst, A, B Tensor }

// Mul is Dst = A * B, elementwise, with the same broadcast as Add.
type Mul struct{ Dst, A, B Tensor }

// SwiGLU is the gated FFN activation Dst = silu(Gate) * Up,
// silu(x) = x / (1 + e^-x).
//
//	Gate, Up, Dst F32 [B, n_ff]
type SwiGLU struct{ Dst, Gate, Up Tensor }

// Rope rotates each head of X by its token's position. Pair j of a head
// (j < Dims/2) turns by angle Pos[b] * Scale * Base^(-2j/Dims) / Factors[j].
// Neox pairs element j with j+Dims/2 (qwen2, qwen3); otherwise pairs are
// adjacent, (2j, 2j+1) (llama, whose GGUF Q/K rows are permuted for it).
// Elements past Dims are left alone.
//
//	X F32 [B, n_heads*HeadDim]  Pos I32 [1, B]  Dst F32 like X
//	Factors F32 [1, Dims/2] (optional: llama3 rope_freqs)
type Rope struct {
	Dst, X, Pos Tensor
	HeadDim     int     // elements per head
	Dims        int     // rotated elements per head, even, <= HeadDim
	Base        float32 // theta, e.g. 1e4 or 1e6
	Scale       float32 // position multiplier (linear RoPE scaling); 1 for none
	Neox        bool
	Factors     Tensor
}

// Attention is causal scaled-dot-product attention over a KV cache with
// grouped KV heads. Query row b (at position Pos[b]) attends cache rows
// 0..Pos[b] inclusive, so one op serves decode (B = 1), prefill and
// verification batches; the batch's own K/V must be written (SetRows) first.
// Query head h reads KV head h / (NHead/NKVHead). K and V may be of
// different types (llama.cpp's -ctk and -ctv); quantized caches need
// HeadDim to be whole blocks. As llama.cpp's flash attention does (the
// CPU backend follows it, to reproduce its results), a backend may round
// the query to F16 for an F16 K, quantize it to Q8_0 for a Q8_0 or Q4_0 K
// (their products' activation type), and accumulate values in F16 for an
// F16 V; kerneltest allows for that.
//
//	Q F32 [B, NHead*HeadDim]  K, V F32|F16|Q8_0|Q4_0 [n_ctx, NKVHead*HeadDim]
//	Pos I32 [1, B]  Dst F32 [B, NHead*HeadDim] (must not overlap Q)
type Attention struct {
	Dst, Q, K, V, Pos Tensor
	NHead, NKVHead    int
	HeadDim           int
	Scale             float32 // usually 1/sqrt(HeadDim)
	// Window > 0 is sliding-window attention (Gemma's local layers): row
	// b attends cache rows Pos[b]-Window+1 .. Pos[b] only.
	Window int
	// Rows, when set, lets one op attend the rows of several sequences
	// (a --parallel pass), each held in its own slot of Ctx rows of K and
	// V: row b's own key is K/V row Rows[b], and it attends its slot's
	// rows Rows[b]-Pos[b] .. Rows[b] exactly as it would attend rows
	// 0 .. Pos[b] of K and V cut to that slot alone.
	//
	//	Rows I32 [1, B]  K, V [slots*Ctx, NKVHead*HeadDim]
	Rows Tensor
	Ctx  int
}

// GeGLU is Gemma's gated FFN activation Dst = gelu(Gate) * Up with the
// tanh approximation, gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
//
//	Gate, Up, Dst F32 [B, n_ff]
type GeGLU struct{ Dst, Gate, Up Tensor }

// Scale is Dst = X * C elementwise (Gemma's embedding scale, sqrt(n_embd)).
//
//	X, Dst F32 [B, n]
type Scale struct {
	Dst, X Tensor
	C      float32
}

// Softmax normalises each row: Dst[b] = exp(X[b] - max) / sum.
//
//	X, Dst F32 [B, n]
type Softmax struct{ Dst, X Tensor }

// Argmax is the index of each row's largest value, the lowest index on ties.
//
//	X F32 [B, n]  Dst I32 [1, B]
type Argmax struct{ Dst, X Tensor }

// TopK is each row's K largest values in descending order with their
// indices; on ties the lower index comes first.
//
//	X F32 [B, n]  Ids I32 [B, K]  Vals F32 [B, K]
type TopK struct{ Ids, Vals, X Tensor }

// MoE is a mixture-of-experts SwiGLU feed-forward network (Qwen3 MoE,
// Mixtral). Each row's router logits, X times Router's rows, pick the Used
// experts of largest softmax probability (the lower index first on ties);
// their probabilities, divided by their sum when Renorm, weight the
// experts' outputs down_e(silu(gate_e x) * up_e x), added in rank order.
// Expert e's matrices are rows [e*FF, (e+1)*FF) of Gate and Up and rows
// [e*n, (e+1)*n) of Down: a GGUF 3-D expert tensor viewed as 2-D. Dst may
// be X (in place).
//
//	X F32 [B, n]  Router [Experts, n]  Gate, Up [Experts*FF, n]
//	Down [Experts*n, FF]  Dst F32 [B, n]
type MoE struct {
	Dst, X, Router, Gate, Up, Down Tensor
	Experts, Used                  int
	Renorm                         bool
}

// Copy is Dst = Src with conversion between F32 and F16; equal shapes,
// strides may differ (e.g. a block's input copied into a column slice of a
// capture buffer).
type Copy struct{ Dst, Src Tensor }

// AllReduce is a collective: on every member of Group at once,
// Dst = A + (Shares[0] + Shares[1] + ...), the shares added in member
// order so that every member gets the same bits. Shares[i] lies on member
// i; an invalid (zero) Tensor is a member that adds nothing this time. Dst
// and A are the running backend's; a zero A makes Dst the sum alone. Each
// member's programs must run the group's AllReduces in the same order with
// the same shapes: a member waits on its device until all have reached
// the op, so one that never runs it leaves the others waiting.
//
//	Shares F32 [B, cols] packed  A F32 [B, cols]  Dst F32 [B, cols] packed
type AllReduce struct {
	Dst, A Tensor
	Shares []Tensor
	Group  ReduceGroup
}

func (GetRows) Name() string   { return "get_rows" }
func (SetRows) Name() string   { return "set_rows" }
func (MatMul) Name() string    { return "mat_mul" }
func (RMSNorm) Name() string   { return "rms_norm" }
func (Add) Name() string       { return "add" }
func (Mul) Name() string       { return "mul" }
func (SwiGLU) Name() string    { return "swiglu" }
func (Rope) Name() string      { return "rope" }
func (Attention) Name() string { return "attention" }
func (Softmax) Name() string   { return "softmax" }
func (Argmax) Name() string    { return "argmax" }
func (TopK) Name() string      { return "top_k" }
func (Copy) Name() string      { return "copy" }
func (MoE) Name() string       { return "moe" }
func (GeGLU) Name() string     { return "geglu" }
func (Scale) Name() string     { return "scale" }
func (AllReduce) Name() string { return "all_reduce" }

func (o GetRows) check() error {
	if err := views(o.Dst, o.Src, o.Idx); err != nil {
		return err
	}
	return first(
		isType(o.Dst, quant.F32), isType(o.Idx, quant.I32),
		shape(o.Idx, 1, o.Dst.Rows), shape(o.Dst, o.Dst.Rows, o.Src.Cols))
}

func (o SetRows) check() error {
	if err := views(o.Dst, o.Src, o.Idx); err != nil {
		return err
	}
	return first(
		isKVType(o.Dst), isType(o.Src, quant.F32), isType(o.Idx, quant.I32),
		shape(o.Idx, 1, o.Src.Rows), shape(o.Src, o.Src.Rows, o.Dst.Cols))
}

// isKVType checks t is a type a KV cache may have: what SetRows writes and
// Attention reads. Which of them a backend runs, its Supports says.
func isKVType(t Tensor) error { return isType(t, quant.F32, quant.F16, quant.Q8_0, quant.Q4_0) }

func (o MatMul) check() error {
	if err := views(o.Dst, o.W, o.X); err != nil {
		return err
	}
	return first(
		isType(o.Dst, quant.F32), isType(o.X, quant.F32),
		shape(o.X, o.X.Rows, o.W.Cols), shape(o.Dst, o.X.Rows, o.W.Rows),
		disjoint(o.Dst, o.X))
}

func (o RMSNorm) check() error {
	if err := views(o.Dst, o.X, o.W); err != nil {
		return err
	}
	return first(
		isType(o.Dst, quant.F32), isType(o.X, quant.F32), isType(o.W, quant.F32),
		shape(o.W, 1, o.X.Cols), shape(o.Dst, o.X.Rows, o.X.Cols),
		positive("eps", float64(o.Eps), true))
}

func (o Add) check() error { return checkBinary(o.Dst, o.A, o.B) }
func (o Mul) check() error { return checkBinary(o.Dst, o.A, o.B) }

func checkBinary(dst, a, b Tensor) error {
	if err := views(dst, a, b); err != nil {
		return err
	}
	rows := a.Rows
	if b.Rows == 1 {
		rows = 1
	}
	return first(
		isType(dst, quant.F32), isType(a, quant.F32), isType(b, quant.F32),
		shape(b, rows, a.Cols), shape(dst, a.Rows, a.Cols))
}

func (o SwiGLU) check() error {
	if err := views(o.Dst, o.Gate, o.Up); err != nil {
		return err
	}
	return first(
		isType(o.Dst, quant.F32), isType(o.Gate, quant.F32), isType(o.Up, quant.F32),
		shape(o.Up, o.Gate.Rows, o.Gate.Cols), shape(o.Dst, o.Gate.Rows, o.Gate.Cols))
}

func (o GeGLU) check() error {
	if err := views(o.Dst, o.Gate, o.Up); err != nil {
		return err
	}
	return first(
		isType(o.Dst, quant.F32), isType(o.Gate, quant.F32), isType(o.Up, quant.F32),
		shape(o.Up, o.Gate.Rows, o.Gate.Cols), shape(o.Dst, o.Gate.Rows, o.Gate.Cols))
}

func (o Scale) check() error {
	if err := views(o.Dst, o.X); err != nil {
		return err
	}
	return first(isType(o.Dst, quant.F32), isType(o.X, quant.F32), shape(o.Dst, o.X.Rows, o.X.Cols))
}

func (o Rope) check() error {
	if err := views(o.Dst, o.X, o.Pos); err != nil {
		return err
	}
	if o.HeadDim <= 0 || o.X.Cols%o.HeadDim != 0 {
		return fmt.Errorf("%w: head size %d does not divide %v", ErrShape, o.HeadDim, o.X)
	}
	if o.Dims <= 0 || o.Dims%2 != 0 || o.Dims > o.HeadDim {
		return fmt.Errorf("%w: %d rotated dims of a %d-wide head", ErrShape, o.Dims, o.HeadDim)
	}
	errs := []error{
		isType(o.Dst, quant.F32), isType(o.X, quant.F32), isType(o.Pos, quant.I32),
		shape(o.Pos, 1, o.X.Rows), shape(o.Dst, o.X.Rows, o.X.Cols),
		positive("base", float64(o.Base), false), positive("scale", float64(o.Scale), false),
	}
	if o.Factors.Valid() {
		errs = append(errs, CheckView(o.Factors), isType(o.Factors, quant.F32), shape(o.Factors, 1, o.Dims/2))
	}
	return first(errs...)
}

func (o Attention) check() error {
	if err := views(o.Dst, o.Q, o.K, o.V, o.Pos); err != nil {
		return err
	}
	if o.HeadDim <= 0 || o.NHead <= 0 || o.NKVHead <= 0 || o.NHead%o.NKVHead != 0 {
		return fmt.Errorf("%w: %d query heads, %d KV heads of %d", ErrShape, o.NHead, o.NKVHead, o.HeadDim)
	}
	for _, t := range []Tensor{o.K, o.V} {
		if bs := t.Type.BlockSize(); bs > 0 && o.HeadDim%bs != 0 {
			return fmt.Errorf("%w: heads of %d split the %d-element blocks of a %v cache", ErrShape, o.HeadDim, bs, t.Type)
		}
	}
	return first(
		isType(o.Dst, quant.F32), isType(o.Q, quant.F32), isType(o.Pos, quant.I32),
		isKVType(o.K), isKVType(o.V),
		shape(o.Q, o.Q.Rows, o.NHead*o.HeadDim), shape(o.Dst, o.Q.Rows, o.Q.Cols),
		shape(o.K, o.K.Rows, o.NKVHead*o.HeadDim), shape(o.V, o.K.Rows, o.K.Cols),
		shape(o.Pos, 1, o.Q.Rows), positive("scale", float64(o.Scale), false),
		positive("window", float64(o.Window), true), disjoint(o.Dst, o.Q), o.checkRows())
}

// checkRows checks the slots of a several-sequence Attention (Rows set).
func (o Attention) checkRows() error {
	if !o.Rows.Valid() {
		return nil
	}
	if err := CheckView(o.Rows); err != nil {
		return err
	}
	if o.Ctx <= 0 || o.K.Rows%o.Ctx != 0 {
		return fmt.Errorf("%w: slots of %d rows in a cache of %d", ErrShape, o.Ctx, o.K.Rows)
	}
	return first(isType(o.Rows, quant.I32), shape(o.Rows, 1, o.Q.Rows))
}

func (o Softmax) check() error {
	if err := views(o.Dst, o.X); err != nil {
		return err
	}
	return first(isType(o.Dst, quant.F32), isType(o.X, quant.F32), shape(o.Dst, o.X.Rows, o.X.Cols))
}

func (o Argmax) check() error {
	if err := views(o.Dst, o.X); err != nil {
		return err
	}
	return first(isType(o.Dst, quant.I32), isType(o.X, quant.F32), shape(o.Dst, 1, o.X.Rows))
}

func (o TopK) check() error {
	if err := views(o.Ids, o.Vals, o.X); err != nil {
		return err
	}
	return first(
		isType(o.Ids, quant.I32), isType(o.Vals, quant.F32), isType(o.X, quant.F32),
		shape(o.Ids, o.X.Rows, o.Ids.Cols), shape(o.Vals, o.X.Rows, o.Ids.Cols),
		atMost("k", o.Ids.Cols, o.X.Cols), disjoint(o.Ids, o.X), disjoint(o.Vals, o.X))
}

func (o Copy) check() error {
	if err := views(o.Dst, o.Src); err != nil {
		return err
	}
	return first(
		isType(o.Dst, quant.F32, quant.F16), isType(o.Src, quant.F32, quant.F16),
		shape(o.Dst, o.Src.Rows, o.Src.Cols))
}

func (o MoE) check() error {
	if err := views(o.Dst, o.X, o.Router, o.Gate, o.Up, o.Down); err != nil {
		return err
	}
	if o.Experts <= 0 || o.Used <= 0 || o.Used > o.Experts || o.Gate.Rows%o.Experts != 0 || o.Gate.Rows == 0 {
		return fmt.Errorf("%w: %d of %d experts over %v", ErrShape, o.Used, o.Experts, o.Gate)
	}
	n, ff := o.X.Cols, o.Gate.Rows/o.Experts
	return first(
		isType(o.Dst, quant.F32), isType(o.X, quant.F32),
		shape(o.Router, o.Experts, n), shape(o.Gate, o.Experts*ff, n), shape(o.Up, o.Experts*ff, n),
		shape(o.Down, o.Experts*n, ff), shape(o.Dst, o.X.Rows, n))
}

func (o AllReduce) check() error {
	if o.Group == nil {
		return fmt.Errorf("%w: no group", ErrShape)
	}
	if n := len(o.Group.Members()); len(o.Shares) != n {
		return fmt.Errorf("%w: %d shares for %d members", ErrShape, len(o.Shares), n)
	}
	if err := first(views(o.Dst), isType(o.Dst, quant.F32)); err != nil {
		return err
	}
	if !o.Dst.Packed() {
		return fmt.Errorf("%w: %v not packed", ErrShape, o.Dst)
	}
	if o.A.Valid() {
		if err := first(views(o.A), isType(o.A, quant.F32), shape(o.A, o.Dst.Rows, o.Dst.Cols)); err != nil {
			return err
		}
	}
	some := false
	for _, s := range o.Shares {
		if !s.Valid() {
			continue
		}
		some = true
		if err := first(views(s), isType(s, quant.F32), shape(s, o.Dst.Rows, o.Dst.Cols), disjoint(o.Dst, s)); err != nil {
			return err
		}
		if !s.Packed() {
			return fmt.Errorf("%w: share %v not packed", ErrShape, s)
		}
	}
	if !some {
		return fmt.Errorf("%w: no shares", ErrShape)
	}
	return nil
}

// views checks each operand's geometry.
func views(ts ...Tensor) error {
	for _, t := range ts {
		if err := CheckView(t); err != nil {
			return err
		}
	}
	return nil
}

// first is the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func isType(t Tensor, want ...quant.Type) error {
	for _, w := range want {
		if t.Type == w {
			return nil
		}
	}
	return fmt.Errorf("%w: %v, want one of %v", ErrType, t, want)
}

func shape(t Tensor, rows, cols int) error {
	if t.Rows != rows || t.Cols != cols {
		return fmt.Errorf("%w: %v, want [%d,%d]", ErrShape, t, rows, cols)
	}
	return nil
}

func positive(name string, v float64, zeroOK bool) error {
	if v > 0 || (zeroOK && v == 0) {
		return nil
	}
	return fmt.Errorf("%w: %s %g", ErrShape, name, v)
}

func atMost(name string, v, limit int) error {
	if v > limit {
		return fmt.Errorf("%w: %s %d above %d", ErrShape, name, v, limit)
	}
	return nil
}

// disjoint rejects operands that share bytes of one buffer where the op
// reads one while writing the other.
func disjoint(a, b Tensor) error {
	if a.Buf != b.Buf {
		return nil
	}
	if a.Off < b.Off+b.Bytes() && b.Off < a.Off+a.Bytes() {
		return fmt.Errorf("%w: %v and %v", ErrOverlap, a, b)
	}
	return nil
}
