package tokenizer

import (
	"fmt"
	"strings"
)

// bpe is byte-level BPE: a piece's bytes start as single-byte tokens, and the
// adjacent pair with the best merge rank is merged until none is left.
type bpe struct {
	byteID       [256]int32        // token of each byte's byte-level rune; NoToken if none
	unk          int32             // stands for bytes without a token; NoToken drops them
	merges       map[uint64]merged // (left id << 32 | right id) -> result
	raw          map[string]int32  // raw bytes of each normal token -> id
	ignoreMerges bool              // take a piece that is itself a token whole (Llama 3)
}

type merged struct {
	rank int32 // lower merges first
	id   int32 // the token made
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

func newBPE(v *Vocab, ids map[string]int32, bl *byteLevel) (*bpe, error) {
	m := &bpe{
		merges:       make(map[uint64]merged, len(v.Merges)),
		unk:          v.UNK,
		raw:          make(map[string]int32, len(v.Tokens)),
		ignoreMerges: v.Pre == "llama-bpe" || v.Pre == "llama3" || v.Pre == "llama-v3",
	}
	for b := range m.byteID {
		m.byteID[b] = NoToken
		if id, ok := ids[string(bl.toRune[b])]; ok {
			m.byteID[b] = id
		}
	}
	for rank, line := range v.Merges {
		// Tokens never hold a plain space (it is spelled Ġ), so the first
		// space after the first character separates the two sides.
		sp := strings.IndexByte(line[min(1, len(line)):], ' ') + 1
		if sp <= 0 {
			return nil, fmt.Errorf("tokenizer: merge %d %q has no space", rank, line)
		}
		left, right := line[:sp], line[sp+1:]
		l, lok := ids[left]
		r, rok := ids[right]
		id, ok := ids[left+right]
		if !lok || !rok || !ok {
			return nil, fmt.Errorf("tokenizer: merge %d %q names a token not in the vocabulary", rank, line)
		}
		key := pairKey(l, r)
		if _, dup := m.merges[key]; !dup {
			m.merges[key] = merged{rank: int32(rank), id: id}
		}
	}
	for id, tok := range v.Tokens {
		if v.typeOf(int32(id)) == TypeNormal {
			m.raw[string(bl.decode(nil, tok))] = int32(id)
		}
	}
	return m, nil
}

// bpeScratch holds what one Encode call reuses across pieces: buffers, and
// the tokens of pieces already seen (prose repeats its words; the cache
// roughly halves the time on English).
type bpeScratch struct {
	syms []bpeSymbol
	heap mergeHeap
	seen map[string][]int32
}

// maxSeen bounds the per-call piece cache.
const maxSeen = 1 << 16

// mergedAway marks a symbol absorbed by its left neighbour.
const mergedAway int32 = -2

type bpeSymbol struct {
	id         int32
	prev, next int32 // neighbours in the list, -1 at the ends
}

// encode appends the tokens of one pre-tokenized piece.
func (m *bpe) encode(dst []int32, piece string, sc *bpeScratch) []int32 {
	if len(piece) == 1 {
		return m.appendID(dst, m.byteID[piece[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.raw[piece]; ok {
			return append(dst, id)
		}
	}
	if ids, ok := sc.seen[piece]; ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = m.merge(dst, piece, sc)
	if sc.seen == nil {
		sc.seen = make(map[string][]int32)
	}
	if len(sc.seen) < maxSeen {
		sc.seen[piece] = dst[start:len(dst):len(dst)]
	}
	return dst
}

// merge appends the tokens BPE makes of piece.
func (m *bpe) merge(dst []int32, piece string, sc *bpeScratch) []int32 {
	syms := sc.syms[:0]
	for i := 0; i < len(piece); i++ {
		syms = append(syms, bpeSymbol{id: m.byteID[piece[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms

	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(candidate{rank: mg.rank, left: int32(i), id: mg.id})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		left := &syms[c.left]
		if left.id == mergedAway || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		// Stale if either side changed since the candidate was made.
		if mg, ok := m.merges[pairKey(left.id, right.id)]; !ok || mg.id != c.id || mg.rank != c.rank {
			continue
		}
		left.id = c.id
		right.id = mergedAway
		left.next = right.next
		if left.next >= 0 {
			syms[left.next].prev = c.left
			if mg, ok := m.merges[pairKey(left.id, syms[left.next].id)]; ok {
				h.push(candidate{rank: mg.rank, left: c.left, id: mg.id})
			}
		}
		if left.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[left.prev].id, left.id)]; ok {
				h.push(candidate{rank: mg.rank, left: left.prev, id: mg.id})
			}
		}
	}
	sc.heap = h
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = m.appendID(dst, syms[i].id)
	}
	return dst
}

// appendID appends id, or for a byte the vocabulary lacks (Falcon's lacks a
// few control bytes) UNK if there is one and nothing otherwise, as the
// reference does.
func (m *bpe) appendID(dst []int32, id int32) []int32 {
	if id == NoToken {
		id = m.unk
	}
	if id == NoToken {
		return dst
	}
	return append(dst, id)
}

// candidate is a possible merge of the symbol at left with its right
// neighbour, made when both had the ids that give id.
type candidate struct {
	rank, left, id int32
}

func (a candidate) less(b candidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// mergeHeap is a binary min-heap of candidates: best rank, then leftmost.
type mergeHeap []candidate

func (h *mergeHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
