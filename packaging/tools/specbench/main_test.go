package main

import (
	"math"
	"testing"
	"time"
)

func TestAcceptance(t *testing.T) {
	rounds := []round{
		{drafted: 4, accepted: 4}, // 4 accepted, no rejection
		{drafted: 4, accepted: 1}, // 1 accepted, then a rejection
		{drafted: 0, accepted: 0}, // no draft: no evidence
		{drafted: 2, accepted: 0}, // a rejection
	}
	if got, want := acceptance(rounds), 5.0/7; math.Abs(got-want) > 1e-12 {
		t.Errorf("acceptance = %g, want %g", got, want)
	}
	if got := acceptance([]round{{}}); got != 0 {
		t.Errorf("acceptance without drafts = %g", got)
	}
}

func TestIdeal(t *testing.T) {
	verify := make([]time.Duration, 17)
	for r := range verify {
		verify[r] = 10*time.Millisecond + time.Duration(r)*time.Millisecond
	}
	// Two rounds of k = 2 at acceptance 0.5: E = 1 + 0.5 + 0.25 = 1.75
	// tokens for 2*2 ms + 13 ms each, against one token per 11 ms.
	out := row{Acceptance: 0.5}
	rounds := []round{{drafted: 2, accepted: 1}, {drafted: 2, accepted: 0}}
	ideal(&out, rounds, verify, 2*time.Millisecond)
	if want := 1.75 / 17 * 11; math.Abs(out.Ideal-want) > 1e-9 || out.DraftCost != "measured" {
		t.Errorf("ideal %g (%s), want %g measured", out.Ideal, out.DraftCost, want)
	}
	// Without a measured step, it is what the rounds took beyond their
	// verification, per drafted token: (20 - 13) ms / 2.
	out = row{Acceptance: 0.5}
	rounds = []round{{drafted: 2, accepted: 1, took: 20 * time.Millisecond}}
	ideal(&out, rounds, verify, 0)
	if out.DraftCost != "derived" || math.Abs(out.DraftStep-3.5) > 1e-9 {
		t.Errorf("derived step %g ms (%s), want 3.5", out.DraftStep, out.DraftCost)
	}
}

func TestParse(t *testing.T) {
	o, err := parse([]string{"-target", "t.gguf", "-temps", "0,0.7", "-sets", "jargon"})
	if err != nil || len(o.temps) != 2 || o.temps[1] != 0.7 || len(o.sets) != 1 || o.label != "cpu" {
		t.Errorf("parse: %+v %v", o, err)
	}
	o, err = parse([]string{"-target", "t.gguf", "-clock", "cpu", "-threads", "1"})
	if err != nil || o.threads != 1 || o.clock == nil {
		t.Fatalf("parse -clock cpu: %+v %v", o, err)
	}
	// The process's CPU time moves with work done.
	t0, moved := o.clock(), false
	for i := 0; i < 1<<28 && !moved; i++ {
		moved = o.clock().After(t0)
	}
	if !moved {
		t.Error("the CPU clock did not move")
	}
	for _, bad := range [][]string{{}, {"-target", "t", "-sets", "poetry"}, {"-target", "t", "-temps", "-1"}, {"-target", "t", "-n", "0"}, {"-target", "t", "-clock", "sundial"}} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func TestLengths(t *testing.T) {
	ks, on := lengths([]round{{drafted: 4}, {drafted: 0}, {drafted: 4}, {drafted: 2}})
	if got := histogram(ks); got != "0:1 2:1 4:2" || on != 0.75 {
		t.Errorf("histogram %q, drafting share %g", got, on)
	}
	if ks, on := lengths(nil); len(ks) != 0 || on != 0 {
		t.Errorf("no rounds: %v %g", ks, on)
	}
}

func TestByPositionAndTrace(t *testing.T) {
	rounds := []round{{drafted: 3, accepted: 3}, {drafted: 2, accepted: 0}, {}, {drafted: 1, accepted: 1}}
	got := byPosition(rounds)
	want := []float64{2.0 / 3, 1.0 / 2, 1}
	if len(got) != len(want) {
		t.Fatalf("byPosition = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("byPosition = %v, want %v", got, want)
		}
	}
	if got, want := trace(rounds), "3/3 2/0 - 1/1"; got != want {
		t.Errorf("trace = %q, want %q", got, want)
	}
}
