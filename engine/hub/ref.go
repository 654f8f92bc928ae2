package hub

import (
	"fmt"
	"strings"
)

// Ref names a model on the Hub, as --model and `tandem pull` take it:
//
//	hf://owner/name/path/to/file.gguf   a file (any part of a split model)
//	hf://owner/name:Q4_K_M              a quantization
//	owner/name:Q4_K_M, owner/name:FILE  the same without the scheme
//	hf://owner/name, owner/name         the repository's only model
//
// A revision may follow the name: owner/name@v1.0:Q8_0.
type Ref struct {
	Repo     string
	Revision string // "" is main
	File     string // a path in the repository; "" when Quant or neither is set
	Quant    string
}

// Scheme starts a Hub reference.
const Scheme = "hf://"

// String writes r back in the hf:// form.
func (r Ref) String() string {
	s := Scheme + r.Repo
	if r.Revision != "" {
		s += "@" + r.Revision
	}
	switch {
	case r.File != "":
		s += "/" + r.File
	case r.Quant != "":
		s += ":" + r.Quant
	}
	return s
}

// rev is the revision to ask for.
func (r Ref) rev() string {
	if r.Revision == "" {
		return "main"
	}
	return r.Revision
}

// ParseRef reads a Hub reference. Without the hf:// scheme only the
// owner/name:X form counts (owner/name alone is a relative path), so
// callers try a local file first.
func ParseRef(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("hub: %q: %s: %w", s, why, ErrBadRef)
	}
	rest, scheme := strings.CutPrefix(s, Scheme)
	var r Ref
	// owner/name[@rev] then /file, :FILE or :QUANT.
	owner, after, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("want owner/name")
	}
	name, tail := after, ""
	if i := strings.IndexAny(after, "/:"); i >= 0 {
		name, tail = after[:i], after[i:]
	}
	if !scheme && !strings.HasPrefix(tail, ":") {
		return bad("want hf://owner/name/FILE or owner/name:QUANT")
	}
	name, r.Revision, _ = strings.Cut(name, "@")
	r.Repo = owner + "/" + name
	if err := checkRepo(r.Repo); err != nil {
		return Ref{}, err
	}
	if r.Revision != "" {
		if err := checkRevision(r.Revision); err != nil {
			return Ref{}, err
		}
	}
	switch {
	case tail == "":
	case strings.HasPrefix(tail, "/"):
		r.File = tail[1:]
	default:
		x := tail[1:]
		if strings.HasSuffix(strings.ToLower(x), ".gguf") {
			r.File = x
		} else {
			r.Quant = strings.ToUpper(x)
			if r.Quant == "" || strings.ContainsAny(r.Quant, "/\\ ") {
				return bad("want a quantization such as Q4_K_M after the colon")
			}
		}
	}
	if r.File != "" {
		if err := checkPath(r.File); err != nil {
			return Ref{}, err
		}
		if !strings.HasSuffix(strings.ToLower(r.File), ".gguf") {
			return bad("the file is not a .gguf")
		}
	}
	return r, nil
}

// IsRef tells whether s is written as a Hub reference (it may still be
// malformed): hf://..., or owner/name:X.
func IsRef(s string) bool {
	if strings.HasPrefix(s, Scheme) {
		return true
	}
	before, after, ok := strings.Cut(s, ":")
	return ok && after != "" && strings.Count(before, "/") == 1 && !strings.HasPrefix(before, "/") &&
		!strings.HasPrefix(before, ".") && !strings.Contains(after, "/")
}
