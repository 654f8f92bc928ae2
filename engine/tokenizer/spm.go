package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// spm is SentencePiece's BPE variant: the text (spaces spelled ▁) starts as
// one symbol per character, and the adjacent pair whose concatenation is the
// vocabulary piece with the highest score is merged until none is left.
// Characters no piece covers fall back to their bytes (<0xNN>), or to UNK.
type spm struct {
	pieces  map[string]int32 // mergeable pieces (normal and user-defined) -> id
	scores  []float32
	byteID  [256]int32 // <0xNN> tokens; NoToken where absent
	unk     int32
	spacify *strings.Replacer
	// wordwise: no piece has a ▁ after another character, so no merge can
	// cross the start of a word and each word can be encoded alone, which
	// keeps the merge queue short (SentencePiece vocabularies trained with
	// split_by_whitespace, such as Llama's, have this property).
	wordwise bool
}

func newSPM(v *Vocab, ids map[string]int32) (*spm, error) {
	m := &spm{
		pieces:  make(map[string]int32, len(v.Tokens)),
		scores:  v.Scores,
		unk:     v.UNK,
		spacify: strings.NewReplacer(" ", "▁"),
	}
	if len(m.scores) == 0 {
		m.scores = make([]float32, len(v.Tokens))
	}
	m.wordwise = true
	for id, tok := range v.Tokens {
		switch v.typeOf(int32(id)) {
		case TypeNormal, TypeUserDefined:
			m.pieces[tok] = int32(id)
			if wordStart(tok) > 0 {
				m.wordwise = false
			}
		}
	}
	for b := range m.byteID {
		m.byteID[b] = NoToken
		if id, ok := ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteID[b] = id
		}
	}
	return m, nil
}

type spmSymbol struct {
	start, n   int32 // the symbol's bytes in the text; n == 0 once merged away
	prev, next int32
}

// spmCandidate is a possible merge of the symbol at left with its neighbour
// when the two spanned n bytes.
type spmCandidate struct {
	score   float32
	left, n int32
}

func (a spmCandidate) better(b spmCandidate) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// wordStart returns the byte offset of the first ▁ in s that follows
// another character, or -1.
func wordStart(s string) int {
	for i, r := range s {
		if r != '▁' {
			if j := strings.Index(s[i:], "▁"); j >= 0 {
				return i + j
			}
			return -1
		}
	}
	return -1
}

// encode appends the tokens of text, with spaces already in it (the caller
// adds the prefix space); it returns an error only for a character with
// neither a byte token nor UNK.
func (m *spm) encode(dst []int32, text string) ([]int32, error) {
	text = m.spacify.Replace(text)
	st := &spmState{m: m}
	if !m.wordwise {
		return st.encodeWord(dst, text)
	}
	for text != "" {
		end := wordStart(text)
		if end < 0 {
			end = len(text)
		}
		word := text[:end]
		text = text[end:]
		if ids, ok := st.seen[word]; ok {
			dst = append(dst, ids...)
			continue
		}
		start := len(dst)
		var err error
		if dst, err = st.encodeWord(dst, word); err != nil {
			return dst, err
		}
		if st.seen == nil {
			st.seen = make(map[string][]int32)
		}
		if len(st.seen) < maxSeen {
			st.seen[word] = dst[start:len(dst):len(dst)]
		}
	}
	return dst, nil
}

// spmState is one encode call's working space, reused from word to word.
type spmState struct {
	m    *spm
	text string // the word being merged
	syms []spmSymbol
	heap []spmCandidate
	seen map[string][]int32 // tokens of the words met so far
}

// encodeWord appends the tokens of text, whose spaces are already ▁.
func (st *spmState) encodeWord(dst []int32, text string) ([]int32, error) {
	m := st.m
	st.text = text
	syms := st.syms[:0]
	for i := 0; i < len(text); {
		_, w := utf8.DecodeRuneInString(text[i:])
		syms = append(syms, spmSymbol{start: int32(i), n: int32(w), prev: int32(len(syms) - 1), next: int32(len(syms) + 1)})
		i += w
	}
	if len(syms) == 0 {
		return dst, nil
	}
	syms[len(syms)-1].next = -1
	st.syms = syms

	st.heap = st.heap[:0]
	for i := range syms {
		st.push(int32(i))
	}
	for len(st.heap) > 0 {
		c := st.pop()
		left := &syms[c.left]
		if left.n == 0 || left.next < 0 || left.n+syms[left.next].n != c.n {
			continue // stale: a side changed since
		}
		right := &syms[left.next]
		left.n += right.n
		right.n = 0
		left.next = right.next
		if left.next >= 0 {
			syms[left.next].prev = c.left
		}
		st.push(left.prev)
		st.push(c.left)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := m.pieces[piece]; ok {
			dst = append(dst, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			id := m.byteID[piece[j]]
			if id == NoToken {
				id = m.unk
			}
			if id == NoToken {
				return dst, fmt.Errorf("tokenizer: no token for byte %#02x and no unknown token", piece[j])
			}
			dst = append(dst, id)
		}
	}
	return dst, nil
}

// push queues the merge of the symbol at left with its right neighbour, if
// their concatenation is a piece.
func (st *spmState) push(left int32) {
	syms := st.syms
	if left < 0 || syms[left].next < 0 {
		return
	}
	l, r := syms[left], syms[syms[left].next]
	id, ok := st.m.pieces[st.text[l.start:r.start+r.n]]
	if !ok {
		return
	}
	h := append(st.heap, spmCandidate{score: st.m.scores[id], left: left, n: l.n + r.n})
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].better(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	st.heap = h
}

// pop takes the best queued merge.
func (st *spmState) pop() spmCandidate {
	h := st.heap
	top := h[0]
	h[0] = h[len(h)-1]
	h = h[:len(h)-1]
	for i := 0; ; {
		l, r, b := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].better(h[b]) {
			b = l
		}
		if r < len(h) && h[r].better(h[b]) {
			b = r
		}
		if b == i {
			break
		}
		h[i], h[b] = h[b], h[i]
		i = b
	}
	st.heap = h
	return top
}
