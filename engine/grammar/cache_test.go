package grammar

import (
	"errors"
	"testing"
)

func TestCache(t *testing.T) {
	v := NewVocab(newByteVocab())
	cache := NewCache(v, 2)
	builds := 0
	get := func(src string) *Constraint {
		t.Helper()
		c, err := cache.Get(src, func() (*Grammar, error) { builds++; return CompileGBNF(src) })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := get(`root ::= "a"`)
	if get(`root ::= "a"`) != a || builds != 1 {
		t.Errorf("a second Get built again (%d builds)", builds)
	}
	get(`root ::= "b"`)
	get(`root ::= "c"`) // evicts "a", the least recently used
	if get(`root ::= "a"`) == a || builds != 4 {
		t.Errorf("after eviction: %d builds", builds)
	}
	if _, err := cache.Get("bad", func() (*Grammar, error) { return CompileGBNF(`root ::= x`) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("build error: %v", err)
	}
	if _, ok := cache.byKey["bad"]; ok {
		t.Error("a failed build was kept")
	}
}
