// Package sample turns logits into tokens: greedy, or a draw from the
// distribution left after repetition penalties, top-k, top-p, min-p and
// temperature, with randomness injected so a seed reproduces a generation.
//
// The same Sampler also hands out the distribution itself (Probs): the
// speculative verifier compares the target's and the draft's distributions
// under identical settings, which is what keeps sampled output distributed
// exactly as the target's.
//
// Sampling is total: settings come from requests and logits from model
// files, neither trusted. Every setting is brought into a range that keeps
// the arithmetic finite (see Params), the arithmetic after the penalties is
// done in float64 on differences from the maximum, every loop over
// candidates has a bound, and logits holding NaN or +Inf (a broken model)
// give ErrNonFinite for that call; the Sampler stays usable.
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// ErrNonFinite is logits that hold NaN or +Inf, or no finite value at all:
// no distribution can be made of them.
var ErrNonFinite = errors.New("logits are not finite")

// Params are the sampling settings. The zero value is greedy.
//
// Values from outside are taken as follows (Clamped applies it, and every
// method of Params and Sampler sees the clamped values):
//   - Temperature: NaN or <= 0 is greedy; above MaxTemperature it is
//     MaxTemperature. Any positive value is safe, however small: the
//     softmax divides differences from the maximum, so a temperature of
//     1e-300 gives all mass to the argmax, as greedy does.
//   - TopK: <= 0 is off. TopP: NaN, <= 0 or >= 1 is off.
//   - MinP: NaN or <= 0 is off; above 1 it is 1 (only the argmax and its ties).
//   - RepeatPenalty: NaN, <= 0 or 1 is off; otherwise clamped to
//     [MinRepeatPenalty, MaxRepeatPenalty].
//   - PresencePenalty, FrequencyPenalty: NaN is 0; otherwise clamped to
//     [-MaxAdditivePenalty, MaxAdditivePenalty].
//   - PenaltyLastN: <= 0 is 64.
//
// Penalised logits that would overflow float32 are held at its largest
// finite value, so finite logits always give a distribution.
type Params struct {
	Temperature      float64 `json:"temperature"`       // <= 0: greedy (argmax)
	TopK             int     `json:"top_k"`             // 0: off
	TopP             float64 `json:"top_p"`             // 0 or >= 1: off
	MinP             float64 `json:"min_p"`             // 0: off
	RepeatPenalty    float64 `json:"repeat_penalty"`    // 0 or 1: off
	PresencePenalty  float64 `json:"presence_penalty"`  // 0: off
	FrequencyPenalty float64 `json:"frequency_penalty"` // 0: off
	PenaltyLastN     int     `json:"penalty_last_n"`    // tokens penalties look back over; 0: 64
	Seed             uint64  `json:"seed"`
}

// The ranges Clamped brings settings into.
const (
	MaxTemperature     = 1e4
	MinRepeatPenalty   = 1e-2
	MaxRepeatPenalty   = 1e2
	MaxAdditivePenalty = 1e3
	defaultPenaltyLast = 64
)

// Clamped returns p with every setting in its documented range; off
// switches are normalised (RepeatPenalty 1, TopP 0, MinP 0, TopK 0).
func (p Params) Clamped() Params {
	switch {
	case !(p.Temperature > 0):
		p.Temperature = 0
	case p.Temperature > MaxTemperature:
		p.Temperature = MaxTemperature
	}
	p.TopK = max(p.TopK, 0)
	if !(p.TopP > 0 && p.TopP < 1) {
		p.TopP = 0
	}
	switch {
	case !(p.MinP > 0):
		p.MinP = 0
	case p.MinP > 1:
		p.MinP = 1
	}
	if !(p.RepeatPenalty > 0) {
		p.RepeatPenalty = 1
	}
	p.RepeatPenalty = min(max(p.RepeatPenalty, MinRepeatPenalty), MaxRepeatPenalty)
	p.PresencePenalty = clampAdditive(p.PresencePenalty)
	p.FrequencyPenalty = clampAdditive(p.FrequencyPenalty)
	if p.PenaltyLastN <= 0 {
		p.PenaltyLastN = defaultPenaltyLast
	}
	return p
}

func clampAdditive(v float64) float64 {
	if v != v {
		return 0
	}
	return min(max(v, -MaxAdditivePenalty), MaxAdditivePenalty)
}

// Greedy reports whether p picks the argmax.
func (p Params) Greedy() bool { return p.Clamped().Temperature == 0 }

// Penalised reports whether p changes logits by the history (repetition,
// presence or frequency penalties), so a greedy choice needs them all.
func (p Params) Penalised() bool {
	c := p.Clamped()
	return c.RepeatPenalty != 1 || c.PresencePenalty != 0 || c.FrequencyPenalty != 0
}

// TemperatureOnly reports whether p draws from every token at a
// temperature alone (no top-k, top-p, min-p or penalty): softmax(logits /
// T), which a backend's softmax can compute where the logits are
// (model.ForwardProbs), so that the host only draws.
func (p Params) TemperatureOnly() bool {
	c := p.Clamped()
	return c.Temperature > 0 && c.TopK <= 0 && c.TopP <= 0 && c.MinP <= 0 && !c.Penalised()
}

// Sampler applies Params. It keeps scratch buffers, so one Sampler serves
// one generation at a time.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	work   []float32
	probs  []float32 // Sample's distribution
	order  []int32
	counts map[int32]int
	sums   []float64 // softmax's partial sums, one per chunk
}

// New returns a sampler drawing its randomness from rng (nil for greedy use).
// It samples with p.Clamped().
func New(p Params, rng *rand.Rand) *Sampler {
	return &Sampler{p: p.Clamped(), rng: rng, counts: map[int32]int{}}
}

// NewSeeded returns a sampler whose randomness comes from p.Seed alone.
func NewSeeded(p Params) *Sampler {
	return New(p, rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15)))
}

// Params returns the settings, clamped.
func (s *Sampler) Params() Params { return s.p }

// Uniform draws from [0, 1) with the sampler's randomness.
func (s *Sampler) Uniform() float64 { return s.rng.Float64() }

// Sample picks the next token after history from logits. It fails with
// ErrNonFinite when logits hold NaN or +Inf.
func (s *Sampler) Sample(logits []float32, history []int32) (int32, error) {
	if s.p.Greedy() && !s.p.Penalised() {
		return argmaxFinite(logits)
	}
	if s.everyToken() {
		// Draw from the exponentials themselves: the draw scales by their
		// sum, so the normalising pass is not needed.
		x, top, err := s.penalised(logits, history)
		if err != nil {
			return 0, err
		}
		if cap(s.probs) < len(x) {
			s.probs = make([]float32, len(x))
		}
		e := s.probs[:len(x)]
		sum := s.exps(e, x, top)
		return drawInChunks(e, s.sums, s.rng.Float64()*sum), nil
	}
	probs, err := s.Probs(s.probs, logits, history)
	if err != nil {
		return 0, err
	}
	s.probs = probs
	if s.p.Greedy() {
		return Argmax(probs), nil
	}
	return Draw(probs, s.rng.Float64()), nil
}

// Pick draws a token as Sample does and also returns the distribution it
// was drawn from (written into dst, grown as needed; what Probs gives) and
// that distribution's largest probability: a sampled draft's step, whose
// distribution the verifier needs. Over every token it costs one pass of
// exponentials: the draw needs no normalised distribution, and the
// largest probability is the maximum's exponential, 1, over their sum.
// Greedy settings give the argmax. It fails as Probs does.
func (s *Sampler) Pick(dst, logits []float32, history []int32) ([]float32, int32, float64, error) {
	if !s.everyToken() {
		p, err := s.Probs(dst, logits, history)
		if err != nil {
			return nil, 0, 0, err
		}
		t := Argmax(p)
		top := float64(p[t])
		if !s.p.Greedy() {
			t = Draw(p, s.rng.Float64())
		}
		return p, t, top, nil
	}
	x, top, err := s.penalised(logits, history)
	if err != nil {
		return nil, 0, 0, err
	}
	if cap(dst) < len(x) {
		dst = make([]float32, len(x))
	}
	dst = dst[:len(x)]
	sum := s.exps(dst, x, top)
	t := drawInChunks(dst, s.sums, s.rng.Float64()*sum)
	s.scale(dst, 1/sum)
	return dst, t, float64(float32(1 / sum)), nil
}

// Probs writes into dst (grown as needed; len(logits) values) the
// distribution Sample draws from. Greedy settings give all mass to the
// argmax of the penalised logits. It fails with ErrNonFinite when logits
// hold NaN or +Inf (-Inf is a token that cannot be drawn), or no finite value.
func (s *Sampler) Probs(dst, logits []float32, history []int32) ([]float32, error) {
	x, top, err := s.penalised(logits, history)
	if err != nil {
		return nil, err
	}
	n := len(x)
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	if s.everyToken() {
		s.softmaxAll(dst, x, top)
		return dst, nil
	}
	clear(dst)
	if s.p.Greedy() {
		dst[Argmax(x)] = 1
		return dst, nil
	}
	keep := s.candidates(x)
	// Temperature scales the surviving logits' differences from their
	// maximum, in float64: each is <= 0 whatever the temperature, so the
	// exponentials lie in [0, 1], the maximum's is 1 and the sum is >= 1.
	maxv := math.Inf(-1)
	for _, i := range keep {
		maxv = max(maxv, float64(x[i]))
	}
	var sum float64
	for _, i := range keep {
		e := math.Exp((float64(x[i]) - maxv) / s.p.Temperature)
		dst[i] = float32(e)
		sum += e
	}
	scale := 1 / sum
	for _, i := range keep {
		dst[i] = float32(float64(dst[i]) * scale)
	}
	return dst, nil
}

// everyToken reports whether sampling draws from the whole tempered
// distribution (no top-k, top-p or min-p): the softmax of every logit.
func (s *Sampler) everyToken() bool {
	return !s.p.Greedy() && s.p.TopK <= 0 && s.p.TopP <= 0 && s.p.MinP <= 0
}

// penalised checks logits (ErrNonFinite) and returns them with the
// penalties applied, and their largest value: logits themselves when no
// penalty applies (they are only read), else a copy in the sampler's
// scratch.
func (s *Sampler) penalised(logits []float32, history []int32) ([]float32, float32, error) {
	top, err := argmaxFinite(logits)
	if err != nil {
		return nil, 0, err
	}
	if !s.p.Penalised() || len(history) == 0 {
		return logits, logits[top], nil
	}
	if cap(s.work) < len(logits) {
		s.work = make([]float32, len(logits))
	}
	x := s.work[:len(logits)]
	copy(x, logits)
	s.penalise(x, history)
	return x, x[Argmax(x)], nil
}

// softmaxChunk is how many tokens one goroutine of exps and softmaxAll
// takes.
const softmaxChunk = 1 << 15

// chunks runs f over x's chunks, those past the first on goroutines of
// their own, and waits for them. The chunks are fixed by the length, not
// the cores, so results added up by chunk do not depend on the machine.
func chunks(n int, f func(c, lo, hi int)) {
	k := (n + softmaxChunk - 1) / softmaxChunk
	var wg sync.WaitGroup
	for c := 1; c < k; c++ {
		wg.Go(func() { f(c, c*softmaxChunk, min(n, (c+1)*softmaxChunk)) })
	}
	f(0, 0, min(n, softmaxChunk))
	wg.Wait()
}

// expCutoff: below it, e^((x - max)/T) is under 2^-150, which a
// probability (the exponential over a sum >= 1) rounds to float32 zero
// and which adds nothing to the float64 sum; the exponential is skipped.
const expCutoff = -104

// exps writes into e the tempered exponentials of x, e^((x - max)/T), and
// returns their sum (of the float32 values, which is what a draw over e
// adds up). A vocabulary of 150k costs one exponential a token, once per
// sampled token and per verified row: the maximum and the exponentials run
// in chunks, those past the first on goroutines, and their sums are added
// in order, so the result does not depend on the machine. x is finite
// where not -Inf, and top is its (finite) maximum (penalised checks).
func (s *Sampler) exps(e, x []float32, top float32) float64 {
	n := len(x)
	k := (n + softmaxChunk - 1) / softmaxChunk
	if cap(s.sums) < k {
		s.sums = make([]float64, k)
	}
	s.sums = s.sums[:k]
	sums := s.sums
	maxv := float64(top)
	// Multiplying by 1/T rather than dividing: a temperature so small its
	// inverse overflows takes the largest float64, which keeps the
	// maximum's 0·(1/T) at 0 and sends every other logit under the cutoff.
	inv := min(1/s.p.Temperature, math.MaxFloat64)
	chunks(n, func(c, lo, hi int) {
		var sum float64
		out := e[lo:hi]
		for i, v := range x[lo:hi] {
			y := (float64(v) - maxv) * inv
			if y < expCutoff {
				out[i] = 0
				continue
			}
			f := float32(expNeg(y))
			out[i] = f
			sum += float64(f)
		}
		sums[c] = sum
	})
	var sum float64
	for _, v := range sums {
		sum += v
	}
	return sum
}

// drawInChunks is drawFrom(p, target) for p whose chunks (of softmaxChunk)
// sum to sums: the sums say which chunk holds the draw, and only that one
// is scanned.
func drawInChunks(p []float32, sums []float64, target float64) int32 {
	var acc float64
	for c, v := range sums {
		if c == len(sums)-1 || target < acc+v {
			lo := c * softmaxChunk
			hi := min(len(p), lo+softmaxChunk)
			// Rounding may leave the chunk's scan just short: its last
			// positive weight, or the draw over the whole.
			if t := drawFrom(p[lo:hi], target-acc); p[lo+int(t)] > 0 {
				return int32(lo) + t
			}
			return drawFrom(p, target)
		}
		acc += v
	}
	return drawFrom(p, target)
}

// softmaxAll is Probs' softmax when every token is a candidate (no top-k,
// top-p or min-p): the exponentials, then each over their sum.
func (s *Sampler) softmaxAll(dst, x []float32, top float32) {
	s.scale(dst, 1/s.exps(dst, x, top))
}

// scale multiplies the exponentials exps wrote by scale, in its chunks.
func (s *Sampler) scale(e []float32, scale float64) {
	chunks(len(e), func(_, lo, hi int) {
		p := e[lo:hi]
		for i, v := range p {
			p[i] = float32(float64(v) * scale)
		}
	})
}

// argmaxFinite is Argmax for logits that must hold no NaN or +Inf and at
// least one finite value. Over a vocabulary's worth it runs in chunks, as
// the softmax does (exps).
func argmaxFinite(x []float32) (int32, error) {
	k := (len(x) + softmaxChunk - 1) / softmaxChunk
	best, bad := make([]int, k), make([]int, k)
	chunks(len(x), func(c, lo, hi int) { best[c], bad[c] = argmaxFiniteChunk(x, lo, hi) })
	b := -1
	for c := range k {
		switch {
		case bad[c] >= 0: // the first NaN or +Inf
			return 0, fmt.Errorf("sample: logit %d is %v: %w", bad[c], x[bad[c]], ErrNonFinite)
		case best[c] >= 0 && (b < 0 || x[best[c]] > x[b]):
			b = best[c]
		}
	}
	if b < 0 {
		return 0, fmt.Errorf("sample: no finite logit among %d: %w", len(x), ErrNonFinite)
	}
	return int32(b), nil
}

// argmaxFiniteChunk is the first largest finite value of x[lo:hi] and
// the first NaN or +Inf there (-1 for none).
func argmaxFiniteChunk(x []float32, lo, hi int) (best, bad int) {
	best, bv := -1, float32(math.Inf(-1))
	for i := lo; i < hi; i++ {
		v := x[i]
		if !(v <= math.MaxFloat32) { // NaN or +Inf
			return best, i
		}
		if v > bv { // never -Inf; the first of ties
			best, bv = i, v
		}
	}
	return best, -1
}

// penalise applies the repetition, presence and frequency penalties to x
// for the tokens in the last PenaltyLastN of history, as llama.cpp does.
func (s *Sampler) penalise(x []float32, history []int32) {
	if !s.p.Penalised() || len(history) == 0 {
		return
	}
	clear(s.counts)
	for _, t := range history[max(0, len(history)-s.p.PenaltyLastN):] {
		if int(t) < len(x) && t >= 0 {
			s.counts[t]++
		}
	}
	rep := s.p.RepeatPenalty
	for t, c := range s.counts {
		v := float64(x[t])
		if v < -math.MaxFloat32 {
			continue // -Inf stays impossible
		}
		if v > 0 {
			v /= rep
		} else {
			v *= rep
		}
		v -= float64(c)*s.p.FrequencyPenalty + s.p.PresencePenalty
		// The clamped settings keep v finite in float64; hold it within float32.
		x[t] = float32(min(max(v, -math.MaxFloat32), math.MaxFloat32))
	}
}

// candidates returns the token ids that survive top-k, top-p and min-p, in
// that order, judged (as llama.cpp does) on the untempered distribution.
// Only the tokens that can survive are sorted: with a vocabulary of 150k
// that is the difference between a microsecond and a tenth of a second.
// x holds no NaN or +Inf and at least one finite value (Probs checks).
func (s *Sampler) candidates(x []float32) []int32 {
	topP := s.p.TopP > 0
	if s.p.TopK <= 0 && !topP && s.p.MinP <= 0 {
		return s.all(len(x))
	}
	maxv := float64(x[Argmax(x)])
	var ids []int32
	switch {
	case s.p.TopK > 0 && s.p.TopK < len(x):
		ids = s.topK(x, s.p.TopK)
	case !topP:
		// min-p alone: no order is needed, only the floor (<= maxv, as
		// MinP <= 1, so the argmax always survives).
		ids = s.above(x, maxv+math.Log(s.p.MinP))
		return ids
	default:
		ids = s.all(len(x))
	}
	var total float64 // >= 1: the maximum is among ids
	minv := maxv      // the smallest finite logit among ids
	for _, i := range ids {
		v := float64(x[i])
		total += math.Exp(v - maxv)
		if v >= -math.MaxFloat32 {
			minv = min(minv, v)
		}
	}
	if topP {
		// Grow a window below the maximum until it holds top_p of the mass:
		// every token outside the window is less likely than every token in
		// it, so the cut inside the window is exact. The window doubles and
		// maxv-minv is finite, so once it reaches minv (at most about 130
		// rounds) it holds the whole pool and the loop ends.
		pool := ids
		for width := 8.0; ; width *= 2 {
			floor := maxv - width
			if floor <= minv {
				floor = math.Inf(-1)
			}
			ids = ids[:0:0]
			for _, i := range pool {
				if float64(x[i]) >= floor {
					ids = append(ids, i)
				}
			}
			sortDesc(ids, x)
			if cut, ok := topPCut(ids, x, maxv, total, s.p.TopP); ok {
				ids = ids[:cut]
				break
			}
			if math.IsInf(floor, -1) {
				break // rounding left the whole pool just short of top_p
			}
		}
	}
	if s.p.MinP > 0 {
		// Keep tokens with p >= min_p * p_max, i.e. logit >= max + ln(min_p).
		floor := maxv + math.Log(s.p.MinP)
		cut := len(ids)
		for j, i := range ids {
			if float64(x[i]) < floor {
				cut = j
				break
			}
		}
		ids = ids[:max(cut, 1)]
	}
	return ids
}

// topPCut is the length of the shortest prefix of ids (sorted, descending)
// whose probability reaches p; ok is false if ids does not reach it.
func topPCut(ids []int32, x []float32, maxv, total, p float64) (int, bool) {
	var acc float64
	for j, i := range ids {
		acc += math.Exp(float64(x[i])-maxv) / total
		if acc >= p {
			return j + 1, true
		}
	}
	return len(ids), false
}

func (s *Sampler) all(n int) []int32 {
	if cap(s.order) < n {
		s.order = make([]int32, n)
	}
	ids := s.order[:n]
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

func (s *Sampler) above(x []float32, floor float64) []int32 {
	ids := s.order[:0]
	for i, v := range x {
		if float64(v) >= floor {
			ids = append(ids, int32(i))
		}
	}
	s.order = ids
	return ids
}

// topK returns the k largest entries of x in descending order.
func (s *Sampler) topK(x []float32, k int) []int32 {
	// A min-heap of the best k so far: O(n log k).
	h := s.order[:0]
	less := func(a, b int32) bool { return x[a] < x[b] || x[a] == x[b] && a > b }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && less(h[r], h[l]) {
				l = r
			}
			if !less(h[l], h[i]) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for i := range x {
		id := int32(i)
		if len(h) < k {
			h = append(h, id)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if !less(h[c], h[p]) {
					break
				}
				h[c], h[p] = h[p], h[c]
				c = p
			}
			continue
		}
		if less(h[0], id) {
			h[0] = id
			down(0)
		}
	}
	s.order = h
	sortDesc(h, x)
	return h
}

// sortDesc orders ids by descending x, lower id first on ties.
func sortDesc(ids []int32, x []float32) {
	slices.SortFunc(ids, func(a, b int32) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return int(a - b)
	})
}

// Argmax is the index of the largest value, the lowest on ties.
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// Draw samples an index from the distribution p with u uniform in [0, 1).
// Over a vocabulary's worth the sum runs in chunks, those past the first
// on goroutines (as exps does), and only the chunk that holds the draw is
// scanned: a sampled draft's step and a verified round's last token draw
// from a whole row of probabilities, and a sequential pass over 152k of
// them costs a fifth of a millisecond. Chunks are fixed by the length, so
// the token does not depend on the machine; it is the one a sequential
// sum gives but where u*sum falls within rounding of a boundary.
func Draw(p []float32, u float64) int32 {
	if len(p) <= softmaxChunk {
		var sum float64
		for _, x := range p {
			sum += float64(x)
		}
		return drawFrom(p, u*sum)
	}
	var buf [8]float64
	sums := buf[:0]
	if k := (len(p) + softmaxChunk - 1) / softmaxChunk; k <= len(buf) {
		sums = buf[:k]
	} else {
		sums = make([]float64, k)
	}
	chunks(len(p), func(c, lo, hi int) {
		var sum float64
		for _, x := range p[lo:hi] {
			sum += float64(x)
		}
		sums[c] = sum
	})
	var sum float64
	for _, v := range sums {
		sum += v
	}
	return drawInChunks(p, sums, u*sum)
}

// DrawExcess draws an index from normalize(max(0, p - q)) with u uniform
// in [0, 1), q taken as 0 past its end: speculative sampling's residual,
// the target's token where the draft's was rejected. It reports false
// when the difference has no positive mass. It runs in chunks as Draw
// does (a rejected round's one pass over the vocabulary).
func DrawExcess(p, q []float32, u float64) (int32, bool) {
	k := (len(p) + softmaxChunk - 1) / softmaxChunk
	var buf [8]float64
	sums := buf[:0]
	if k <= len(buf) {
		sums = buf[:k]
	} else {
		sums = make([]float64, k)
	}
	chunks(len(p), func(c, lo, hi int) { sums[c] = excessSum(p, q, lo, hi) })
	var mass float64
	for _, v := range sums {
		mass += v
	}
	if !(mass > 0) {
		return 0, false
	}
	target := u * mass
	var acc float64
	for c, v := range sums {
		if c == len(sums)-1 || target < acc+v {
			lo := c * softmaxChunk
			if _, t, ok := excessFrom(p, q, lo, min(len(p), lo+softmaxChunk), acc, target); ok {
				return t, true
			}
			break // rounding left target at the chunk's top
		}
		acc += v
	}
	// The draw over the whole, or its last index with an excess.
	_, t, _ := excessFrom(p, q, 0, len(p), 0, target)
	return t, true
}

// excessSum is the sum of the positive excesses p[i] - q[i] over [lo,
// hi), q[i] as 0 past q's end (without branches: their signs are a coin
// toss).
func excessSum(p, q []float32, lo, hi int) float64 {
	n := min(max(len(q), lo), hi)
	var sum float64
	for i, v := range p[lo:n] {
		sum += max(float64(v)-float64(q[lo+i]), 0)
	}
	for _, v := range p[n:hi] {
		sum += max(float64(v), 0)
	}
	return sum
}

// excessFrom adds the positive excesses p[i] - q[i] (q[i] as 0 past q's
// end) of [lo, hi) to acc until the sum passes target: it returns the
// sum, the index where it passed (ok) or else the last index with an
// excess (-1 for none). The sum runs without branches on the signs (a
// coin toss where p and q are close), and the sum can only pass target
// at an index with an excess.
func excessFrom(p, q []float32, lo, hi int, acc, target float64) (float64, int32, bool) {
	n := min(max(len(q), lo), hi) // [lo, n) has q, [n, hi) does not
	for i, v := range p[lo:n] {
		acc += max(float64(v)-float64(q[lo+i]), 0)
		if target < acc {
			return acc, int32(lo + i), true
		}
	}
	for i, v := range p[n:hi] {
		acc += max(float64(v), 0)
		if target < acc {
			return acc, int32(n + i), true
		}
	}
	for i := hi - 1; i >= lo; i-- {
		if d := float64(p[i]) - float64(at(q, i)); d > 0 {
			return acc, int32(i), false
		}
	}
	return acc, -1, false
}

// at is q[i], or 0 past q's end.
func at(q []float32, i int) float32 {
	if i >= len(q) {
		return 0
	}
	return q[i]
}

// drawFrom is the index where the running sum of the weights w first
// passes target (in [0, sum(w))); the last positive weight's when rounding
// leaves target at the very top.
func drawFrom(w []float32, target float64) int32 {
	p := w
	last := int32(0)
	var acc float64
	for i, x := range p {
		if x <= 0 {
			continue
		}
		acc += float64(x)
		last = int32(i)
		if target < acc {
			return last
		}
	}
	return last
}
