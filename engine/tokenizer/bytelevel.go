package tokenizer

import "unicode/utf8"

// byteLevel is GPT-2's reversible byte <-> rune table: byte-level BPE
// vocabularies spell every byte as a printable rune so that tokens are
// strings. Printable Latin-1 bytes stand for themselves; the other 68 bytes
// (controls, space, DEL, NBSP, soft hyphen) take runes 256, 257, ... in
// byte order.
type byteLevel struct {
	toRune [256]rune
	toByte map[rune]byte
}

func newByteLevel() *byteLevel {
	bl := &byteLevel{toByte: make(map[rune]byte, 256)}
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = next
			next++
		}
		bl.toRune[b] = r
		bl.toByte[r] = byte(b)
	}
	return bl
}

// decode appends the bytes a byte-level token text stands for. Runes outside
// the table (only in malformed vocabularies) are kept as their UTF-8.
func (bl *byteLevel) decode(dst []byte, token string) []byte {
	for _, r := range token {
		if b, ok := bl.toByte[r]; ok {
			dst = append(dst, b)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}
