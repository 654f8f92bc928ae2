package tokenizer

import (
	"sort"
	"strings"
	"unicode/utf8"
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

// defuseMark is U+FDD0, a Unicode noncharacter: reserved for a program's
// internal use, never valid in interchanged text, so removing it from
// untrusted text loses nothing a user meant.
const defuseMark = "\uFDD0"

// Defuse returns text in which no special token's text can be matched: a
// mark goes after the first character of each occurrence (and any mark the
// text already held is dropped). Text so marked can be placed in a prompt
// (a chat message rendered by its template) and the whole prompt encoded
// with ParseSpecial and Defused: the prompt's own special tokens are
// parsed, the defused text is encoded exactly as plain text.
func (t *Tokenizer) Defuse(text string) string {
	text = strings.ReplaceAll(text, defuseMark, "")
	var b strings.Builder
	start := 0
	t.specials.each(text, func(at int, id int32) {
		_, size := utf8.DecodeRuneInString(t.specials.text[id])
		b.WriteString(text[start : at+size])
		b.WriteString(defuseMark)
		start = at + size
	})
	if start == 0 {
		return text
	}
	b.WriteString(text[start:])
	return b.String()
}

// each calls onToken with the offset and id of each special token in text,
// leftmost first and longest at a position, in order.
func (s *specials) each(text string, onToken func(at int, id int32)) {
	for i := 0; i < len(text); i++ {
		for _, id := range s.byFirst[text[i]] {
			if tok := s.text[id]; strings.HasPrefix(text[i:], tok) {
				onToken(i, id)
				i += len(tok) - 1
				break
			}
		}
	}
}

// split calls onText for each run of text between special tokens and onToken
// for each special token, in order; it stops at the first error.
func (s *specials) split(text string, onText func(string) error, onToken func(int32) error) error {
	start := 0
	var err error
	s.each(text, func(at int, id int32) {
		if err != nil {
			return
		}
		if at > start {
			if err = onText(text[start:at]); err != nil {
				return
			}
		}
		err = onToken(id)
		start = at + len(s.text[id])
	})
	if err != nil {
		return err
	}
	if start < len(text) {
		return onText(text[start:])
	}
	return nil
}
