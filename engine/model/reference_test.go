package model

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// refModel is a plain float64 forward pass written straight from the
// architecture descriptions, sharing nothing with the kernels: a second
// opinion that separates our arithmetic from the oracle's.
type refModel struct {
	t     testing.TB
	p     Params
	f     *gguf.File
	cache map[string][]float64
}

func newRefModel(t testing.TB, p Params, f *gguf.File) *refModel {
	return &refModel{t: t, p: p, f: f, cache: map[string][]float64{}}
}

// tensor is a weight dequantized to float64, nil when the file lacks it.
func (r *refModel) tensor(name string) []float64 {
	if w, ok := r.cache[name]; ok {
		return w
	}
	info, ok := r.f.Tensor(name)
	if !ok {
		return nil
	}
	data, err := r.f.TensorData(info)
	if err != nil {
		r.t.Fatal(err)
	}
	vals := make([]float32, info.Elements())
	if err := quant.Dequantize(info.Type, data, vals); err != nil {
		r.t.Fatal(err)
	}
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = float64(v)
	}
	r.cache[name] = out
	return out
}

// matvec is W x for W stored as rows of len(x).
func matvec(w, x []float64) []float64 {
	n := len(x)
	out := make([]float64, len(w)/n)
	for o := range out {
		var s float64
		for i, v := range w[o*n : (o+1)*n] {
			s += v * x[i]
		}
		out[o] = s
	}
	return out
}

func rmsnorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
	return out
}

func (r *refModel) rope(x []float64, pos int) {
	p := r.p
	for h := 0; h < len(x); h += p.HeadDim {
		for j := 0; j < p.RopeDims/2; j++ {
			theta := float64(pos) * math.Pow(float64(p.RopeBase), -float64(2*j)/float64(p.RopeDims))
			a, b := h+2*j, h+2*j+1
			if p.arch.neox {
				a, b = h+j, h+j+p.RopeDims/2
			}
			c, s := math.Cos(theta), math.Sin(theta)
			x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
		}
	}
}

// swiglu is down(silu(gate h) * up h).
func swiglu(gate, up, down, h []float64) []float64 {
	g, u := matvec(gate, h), matvec(up, h)
	for d := range g {
		g[d] = g[d] / (1 + math.Exp(-g[d])) * u[d]
	}
	return matvec(down, g)
}

// experts adds to x the routed experts' output for its normed h, as
// Qwen3 MoE routes: softmax over the router's logits, the ExpertsUsed most
// probable, their probabilities renormalised to sum to 1.
func (r *refModel) experts(x, h, router, gate, up, down []float64) {
	p := r.p
	logits := matvec(router, h)
	probs := make([]float64, len(logits))
	top, sum := math.Inf(-1), 0.0
	for _, v := range logits {
		top = max(top, v)
	}
	for e, v := range logits {
		probs[e] = math.Exp(v - top)
		sum += probs[e]
	}
	chosen := make([]int, 0, p.ExpertsUsed)
	total := 0.0
	for range p.ExpertsUsed {
		best := -1
		for e, v := range probs {
			if (best < 0 || v > probs[best]) && !slices.Contains(chosen, e) {
				best = e
			}
		}
		chosen = append(chosen, best)
		total += probs[best]
	}
	g, d := p.ExpertFF*p.Embd, p.Embd*p.ExpertFF // one expert's gate/up and down
	for _, e := range chosen {
		o := swiglu(gate[e*g:(e+1)*g], up[e*g:(e+1)*g], down[e*d:(e+1)*d], h)
		for i := range x {
			x[i] += probs[e] / total * o[i]
		}
	}
}

// logits runs the whole sequence and returns the logits of every position.
func (r *refModel) logits(tokens []int32) [][]float64 {
	p := r.p
	eps := float64(p.NormEps)
	emb := r.tensor("token_embd.weight")
	head := r.tensor("output.weight")
	if head == nil {
		head = emb
	}
	xs := make([][]float64, len(tokens))
	for i, t := range tokens {
		xs[i] = append([]float64(nil), emb[int(t)*p.Embd:(int(t)+1)*p.Embd]...)
	}
	for l := range p.Layers {
		w := func(s string) []float64 { return r.tensor(fmt.Sprintf("blk.%d.%s", l, s)) }
		wq, wk, wv, wo := w("attn_q.weight"), w("attn_k.weight"), w("attn_v.weight"), w("attn_output.weight")
		qn, kn := w("attn_q_norm.weight"), w("attn_k_norm.weight")
		ks, vs := make([][]float64, len(tokens)), make([][]float64, len(tokens))
		qs := make([][]float64, len(tokens))
		for i, x := range xs {
			h := rmsnorm(x, w("attn_norm.weight"), eps)
			q, k, v := matvec(wq, h), matvec(wk, h), matvec(wv, h)
			for _, b := range []struct {
				x    []float64
				name string
			}{{q, "attn_q.bias"}, {k, "attn_k.bias"}, {v, "attn_v.bias"}} {
				for i, c := range w(b.name) {
					b.x[i] += c
				}
			}
			if qn != nil {
				for o := 0; o < len(q); o += p.HeadDim {
					copy(q[o:], rmsnorm(q[o:o+p.HeadDim], qn, eps))
				}
				for o := 0; o < len(k); o += p.HeadDim {
					copy(k[o:], rmsnorm(k[o:o+p.HeadDim], kn, eps))
				}
			}
			r.rope(q, i)
			r.rope(k, i)
			qs[i], ks[i], vs[i] = q, k, v
		}
		for i := range xs {
			attn := make([]float64, p.Heads*p.HeadDim)
			for h := range p.Heads {
				g := h / (p.Heads / p.KVHeads)
				q := qs[i][h*p.HeadDim : (h+1)*p.HeadDim]
				scores := make([]float64, i+1)
				m := math.Inf(-1)
				for t := range scores {
					var s float64
					for d, v := range q {
						s += v * ks[t][g*p.HeadDim+d]
					}
					scores[t] = s / math.Sqrt(float64(p.HeadDim))
					m = max(m, scores[t])
				}
				var sum float64
				for t := range scores {
					scores[t] = math.Exp(scores[t] - m)
					sum += scores[t]
				}
				for t, s := range scores {
					for d := range p.HeadDim {
						attn[h*p.HeadDim+d] += s / sum * vs[t][g*p.HeadDim+d]
					}
				}
			}
			o := matvec(wo, attn)
			for d := range xs[i] {
				xs[i][d] += o[d]
			}
		}
		gate, up, down := w("ffn_gate.weight"), w("ffn_up.weight"), w("ffn_down.weight")
		router := w("ffn_gate_inp.weight")
		for _, x := range xs {
			h := rmsnorm(x, w("ffn_norm.weight"), eps)
			if router != nil {
				r.experts(x, h, router, w("ffn_gate_exps.weight"), w("ffn_up_exps.weight"), w("ffn_down_exps.weight"))
				continue
			}
			o := swiglu(gate, up, down, h)
			for d := range x {
				x[d] += o[d]
			}
		}
	}
	out := make([][]float64, len(xs))
	norm := r.tensor("output_norm.weight")
	for i, x := range xs {
		out[i] = matvec(head, rmsnorm(x, norm, eps))
	}
	return out
}
