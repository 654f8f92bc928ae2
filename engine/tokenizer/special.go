package tokenizer

import (
	"sort"
	"strings"
)

// specials finds special tokens (control, user-defined and unknown types) in
// text, leftmost first and longest at a position, as the reference
// tokenizers' added-token matcher does.
type specials struct {
	byFirst map[byte][]int32 // ids by the first byte of their text, longest text first
	text    []string         // id -> text (the vocabulary's tokens)
}

func newSpecials(v *Vocab) *specials {
	s := &specials{byFirst: map[byte][]int32{}, text: v.Tokens}
	for id, tok := range v.Tokens {
		switch v.typeOf(int32(id)) {
		case TypeControl, TypeUserDefined, TypeUnknown:
			if tok != "" {
				s.byFirst[tok[0]] = append(s.byFirst[tok[0]], int32(id))
			}
		}
	}
	for _, ids := range s.byFirst {
		sort.SliceStable(ids, func(i, j int) bool { return len(s.text[ids[i]]) > len(s.text[ids[j]]) })
	}
	return s
}

// split calls onText for each run of text between special tokens and onToken
// for each special token, in order; it stops at the first error.
func (s *specials) split(text string, onText func(string) error, onToken func(int32) error) error {
	start := 0
	for i := 0; i < len(text); i++ {
		cands, ok := s.byFirst[text[i]]
		if !ok {
			continue
		}
		for _, id := range cands {
			tok := s.text[id]
			if !strings.HasPrefix(text[i:], tok) {
				continue
			}
			if i > start {
				if err := onText(text[start:i]); err != nil {
					return err
				}
			}
			if err := onToken(id); err != nil {
				return err
			}
			i += len(tok) - 1
			start = i + 1
			break
		}
	}
	if start < len(text) {
		return onText(text[start:])
	}
	return nil
}
