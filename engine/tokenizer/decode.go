package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids: the exact inverse of Encode for valid
// text. Special tokens read as their text; ids out of range read as nothing;
// byte sequences that are not UTF-8 read as U+FFFD, one per byte.
func (t *Tokenizer) Decode(ids []int32) string {
	buf := make([]byte, 0, 4*len(ids))
	afterSpecial := true
	for _, id := range ids {
		buf = t.appendPiece(buf, id, &afterSpecial)
	}
	out, _ := validPrefix(buf, true)
	return out
}

// StreamDecoder decodes tokens one at a time, as a model makes them. Its
// output never splits a UTF-8 sequence: bytes of an incomplete rune wait for
// the tokens that complete it. The concatenated output equals Decode.
type StreamDecoder struct {
	t            *Tokenizer
	pending      []byte // decoded bytes not yet returned: an incomplete rune
	afterSpecial bool   // SPM: the next text token lost its prefix space in Encode
}

// NewStreamDecoder starts decoding a new sequence.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t, afterSpecial: true}
}

// Add decodes one more token and returns the text it completes (possibly "").
func (d *StreamDecoder) Add(id int32) string {
	d.pending = d.t.appendPiece(d.pending, id, &d.afterSpecial)
	out, rest := validPrefix(d.pending, false)
	d.pending = append(d.pending[:0], rest...)
	return out
}

// Flush returns whatever is held back (an incomplete rune, as U+FFFD) and
// resets the decoder for a new sequence.
func (d *StreamDecoder) Flush() string {
	out, _ := validPrefix(d.pending, true)
	d.pending = d.pending[:0]
	d.afterSpecial = true
	return out
}

// validPrefix returns b as valid UTF-8, each invalid byte replaced by U+FFFD,
// and the incomplete rune at its end, which it keeps back unless final.
func validPrefix(b []byte, final bool) (string, []byte) {
	if utf8.Valid(b) {
		return string(b), nil
	}
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, w := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && w == 1 {
			if !final && !utf8.FullRune(b[i:]) {
				return sb.String(), b[i:]
			}
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[i : i+w])
		}
		i += w
	}
	return sb.String(), nil
}

// appendPiece appends the bytes id stands for. afterSpecial tracks the
// SentencePiece rule that text after the start or a special token gained a
// prefix space, which decoding takes back off.
func (t *Tokenizer) appendPiece(dst []byte, id int32, afterSpecial *bool) []byte {
	if id < 0 || int(id) >= len(t.vocab.Tokens) {
		return dst
	}
	tok := t.vocab.Tokens[id]
	typ := t.vocab.typeOf(id)
	switch typ {
	case TypeControl, TypeUserDefined, TypeUnknown:
		*afterSpecial = true
		if t.spm != nil && typ == TypeUserDefined {
			return append(dst, strings.ReplaceAll(tok, "▁", " ")...)
		}
		return append(dst, tok...)
	}
	strip := *afterSpecial && t.spm != nil && t.vocab.AddSpacePrefix
	*afterSpecial = false
	if t.spm == nil {
		return t.bytes.decode(dst, tok)
	}
	if typ == TypeByte {
		if b, ok := parseByteToken(tok); ok {
			if strip && b == ' ' {
				return dst
			}
			return append(dst, b)
		}
	}
	if strip {
		tok = strings.TrimPrefix(tok, "▁")
	}
	return append(dst, strings.ReplaceAll(tok, "▁", " ")...)
}

// parseByteToken reads a SentencePiece byte token, <0xNN>.
func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	return byte(v), err == nil
}
