package grammar

import (
	"bytes"
	"math/bits"
	"slices"

	"github.com/tandem-run/tandem/engine/tokenizer"
)

// Vocab is what a Matcher needs of a model's vocabulary: each token's
// bytes, a trie over them, and the end-of-generation tokens. It is built
// once per model and is immutable and safe for concurrent use.
type Vocab struct {
	size     int      // token ids are 0..size-1
	pieces   [][]byte // id -> bytes; nil for tokens that are no text (control, unused)
	eog      []int32  // allowed exactly when the grammar is complete
	trie     []trieNode
	ids      []int32 // token ids in byte order; trie nodes point into it
	maxDepth int
}

// trieNode is one byte of the trie, in preorder: the node after a node's
// whole subtree is next, so a walk skips a refused prefix in one step.
type trieNode struct {
	b            byte
	depth        uint16 // 1 for the first byte of a token
	next         int32
	tokLo, tokHi int32 // ids[tokLo:tokHi] end exactly here
}

// VocabSource is the part of a tokenizer a Vocab is built from.
type VocabSource interface {
	VocabSize() int
	PieceBytes(id int32) ([]byte, bool)
	IsEOG(id int32) bool
}

var _ VocabSource = (*tokenizer.Tokenizer)(nil)

// NewVocab reads every token's bytes from t and builds the trie. Tokens
// that stand for no text are never allowed, except end-of-generation
// tokens once the grammar is complete.
func NewVocab(t VocabSource) *Vocab {
	n := t.VocabSize()
	v := &Vocab{size: n, pieces: make([][]byte, n)}
	for id := range int32(n) {
		if t.IsEOG(id) {
			v.eog = append(v.eog, id)
			continue
		}
		if b, ok := t.PieceBytes(id); ok && len(b) > 0 && len(b) < 1<<16 {
			v.pieces[id] = b
			v.ids = append(v.ids, id)
		}
	}
	slices.SortFunc(v.ids, func(a, b int32) int {
		if c := bytes.Compare(v.pieces[a], v.pieces[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	var path []int32 // node index per depth of the current token
	var prev []byte
	for i, id := range v.ids {
		p := v.pieces[id]
		l := 0
		for l < len(p) && l < len(prev) && p[l] == prev[l] {
			l++
		}
		for len(path) > l {
			v.trie[path[len(path)-1]].next = int32(len(v.trie))
			path = path[:len(path)-1]
		}
		for d := l; d < len(p); d++ {
			path = append(path, int32(len(v.trie)))
			v.trie = append(v.trie, trieNode{b: p[d], depth: uint16(d + 1), tokLo: int32(i), tokHi: int32(i)})
		}
		last := &v.trie[path[len(path)-1]]
		if last.tokHi == last.tokLo {
			last.tokLo = int32(i)
		}
		last.tokHi = int32(i + 1)
		v.maxDepth = max(v.maxDepth, len(p))
		prev = p
	}
	for _, n := range path {
		v.trie[n].next = int32(len(v.trie))
	}
	return v
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Mask is a set of token ids, one bit each. Masks a Matcher returns are
// shared: read them, never change them.
type Mask []uint64

func newMask(n int) Mask { return make(Mask, (n+63)/64) }

// Has reports whether id is in the mask.
func (m Mask) Has(id int32) bool {
	i := int(id) >> 6
	return id >= 0 && i < len(m) && m[i]&(1<<(uint(id)&63)) != 0
}

func (m Mask) set(id int32) { m[id>>6] |= 1 << (uint(id) & 63) }

// Count is the number of ids in the mask.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}
