package grammar

import (
	"testing"

	"github.com/tandem-run/tandem/engine/tokenizer"
)

// benchDoc is a typical structured answer: the masks along its tokens are
// what one request computes.
const benchDoc = "{\n  \"name\": \"Ann Smith\", \"age\": 31, \"height\": 1.68, \"role\": \"admin\",\n  \"tags\": [\"alpha\", \"beta\"], \"active\": true\n}"

// BenchmarkMask reports microseconds per mask along benchDoc's tokens for
// the person schema: cold (a new constraint per document, so every state's
// mask is computed) and warm (masks cached from an earlier request).
func BenchmarkMask(b *testing.B) {
	for _, name := range []string{"demo", "qwen3"} {
		v, tk := loadVocab(b, name)
		ids, err := tk.Encode(benchDoc, tokenizer.EncodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		g, err := FromSchema([]byte(schemaCases[0].schema))
		if err != nil {
			b.Fatal(err)
		}
		run := func(b *testing.B, c *Constraint) {
			m := c.NewMatcher()
			for _, id := range ids {
				mask, err := m.Mask()
				if err != nil || !mask.Has(id) {
					b.Fatalf("token %d refused (%v)", id, err)
				}
				if err := m.Advance(id); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(name+"/cold", func(b *testing.B) {
			for b.Loop() {
				c, err := NewConstraint(g, v)
				if err != nil {
					b.Fatal(err)
				}
				run(b, c)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ids)), "us/mask")
		})
		b.Run(name+"/warm", func(b *testing.B) {
			c, err := NewConstraint(g, v)
			if err != nil {
				b.Fatal(err)
			}
			run(b, c)
			for b.Loop() {
				run(b, c)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ids)), "us/mask")
		})
	}
}

// BenchmarkNewVocab is the one-off cost per model of the vocabulary trie.
func BenchmarkNewVocab(b *testing.B) {
	tk := loadTokenizer(b, "qwen3")
	for b.Loop() {
		NewVocab(tk)
	}
}
