package tokenizer

// PieceBytes returns the bytes id stands for in the middle of generated
// text: what the decoder appends for it after a normal token. It reports
// false for tokens that stand for no text of their own (control, unknown
// and unused tokens, ids out of range). Grammar-constrained decoding
// matches these bytes, not Decode's text, because a token may hold part of
// a UTF-8 sequence, which Decode would show as U+FFFD.
func (t *Tokenizer) PieceBytes(id int32) ([]byte, bool) {
	if id < 0 || int(id) >= len(t.vocab.Tokens) {
		return nil, false
	}
	switch t.vocab.typeOf(id) {
	case TypeControl, TypeUnknown, TypeUnused:
		return nil, false
	}
	afterSpecial := false
	b := t.appendPiece(nil, id, &afterSpecial)
	return b, len(b) > 0
}
