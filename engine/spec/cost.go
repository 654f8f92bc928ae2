package spec

// Cost-aware draft length: draft k tokens a round only when that is
// expected to produce more tokens per second than the target alone.
//
// A round drafts k tokens (k draft steps), then verifies them and one more
// position in one target pass of k+1 rows. With a_i the chance that
// drafted position i is accepted given every position before it was, it
// yields
//
//	E(k) = 1 + sum over j <= k of a_1 a_2 ... a_j
//
// tokens (the accepted run plus the target's own token) and costs
// draft(k) + verify(k+1); the target alone yields 1 token per verify(1).
// The Chooser keeps running measurements of both costs and of each a_i,
// and picks
//
//	k* = argmax over 1..limit of E(k) / (draft(k) + verify(k+1) + host1),
//
// or k = 0 (drafting off) unless k* beats 1/(verify(1) + host0) by
// Margin; once on,
// drafting stays on until k* falls Margin below it (hysteresis: near
// break-even the running estimates wander across one threshold).
//
// Why a rate per position. Drafts differ in how acceptance moves with
// depth. On the H200's 8B Q4_K_M target an EAGLE-3 head's positions 1-4
// were accepted 53 of 120, 10 of 48, 4 of 38 and 0 of 26 times (each
// among the rounds that reached it), while a model draft's first
// position was accepted 65% of the time and each next one 72-85% given
// the one before (its first follows a token it did not expect). One
// geometric rate prices every depth at the average: it made EAGLE-3's
// deep drafts look worth it, and the Chooser drifted from k = 1 (1.18x
// the target alone) to k = 2-4 (1.14x).
//
// The pooled rate p is the geometric fit, in which a round of k drafts
// with m accepted shows m successes and, when m < k, one failure:
// p = S / (S + F) with a Beta(1, 1) prior, the evidence of past rounds
// decayed by Forget per round, so that a pair whose acceptance changes
// (another prompt, another temperature) is followed within a few rounds.
// Each a_i is position i's own evidence (the rounds that reached it:
// accepted there, or rejected) beside shrink = 4 trials at p:
// a_i = (kept_i + 4p) / (reached_i + 4). Nothing forces a_i to fall with
// i: a model draft's later positions are accepted more often than its
// first. A position never reached, or rarely, takes p, not the deepest
// measured one's rate: EAGLE-3's last measured position (0 of 26) would
// then forbid every longer draft for good, while p lets a longer one be
// tried again when the pooled evidence says it may pay (the text turns
// to what the draft knows).
//
// Why 4 trials at p. Pricing the first position on its own evidence was
// tried on the H200 and lost (T = 0.7: 1.44x against the pooled rate's
// 1.76x): it rests on one trial a round, so a run of early rejections
// turned drafting off for tens of rounds. Beside 4 trials at p, which
// gathers every position's evidence, a run of rejections moves a_1 less
// (TestChooserEarlyRejections: with no trials at p, 5 rejected first
// rounds kept drafting off for 15 rounds, and a probe found it again;
// with 4, one round at most). In the simulations of cost_test.go, 2
// made a flat-rate pair's choice wander from k = 3 to 2 more often than
// not, and 8 slowed the return after acceptance collapsed and came back
// past 300 rounds. What it costs: each position's estimate rests on fewer
// trials than the pooled one, so where every position is alike the
// choice wanders a little more (TestChooserPaysAtK3: 1.562x, 1.572x on
// the pooled rate alone); and a fresh Chooser whose first five drafting
// rounds are all rejected now waits for a probe (15 rounds), where the
// pooled rate, held up by its prior, kept drafting.
//
// Why a position's evidence ages by its own trials (keep = 0.9 at each:
// about the last ten), not by rounds. While the Chooser drafts one token,
// nothing reaches position 2; aged by rounds, its evidence was gone
// within a dozen, a_2 fell back to p, and every time p wandered up the
// Chooser drafted 2 again (TestChooserEAGLE3DraftsOne: 2 or more in 35%
// of the rounds, 1.135x). Kept until position 2 is tried again, it holds
// the choice at k = 1 (2 or more in 15%, 1.174x). Rounds that draft
// nothing age it by Forget each, as the pooled evidence, so that a probe
// after a spell off decides mostly on what it sees. Ten trials and not
// more: position 1 is tried once a round, so a collapse of acceptance
// (TestChooserAcceptanceCollapses: off within 10 rounds) must show in it
// within ten; with 0.92 it took 11, with 0.95, 18.
//
// EAGLE-3's deeper positions, measured again (hdepth). In the closing
// H200 run of the 8B Q4_K_M pair (/work/.device/8, greedy, known
// prompts) the adaptive rounds reached positions 2 and 3 often, and they
// were accepted about as often as the first: 150 of 345, 41 of 76, 18 of
// 40 at positions 1-3 (F16 draft), 119 of 304, 32 of 60, 18 of 32
// (Q4_K_M), not the older 10 of 48 and 4 of 38 above. The k = 3 rounds
// were a fair bet: past the first repetition the adaptive rows made
// 1.216x and 1.224x (F16), 1.224x and 1.235x (Q4_K_M) where k = 1 made
// 1.20-1.225x. What the rows lose is their first repetition on a fresh
// load (1.13x, 1.04x; 1.12x on this branch): its first prompt leaves the
// text the draft knows for 14 tokens at its 17th, drafting turns off
// near the end of that run, and the wait for a probe (ProbeAfter) then
// spans text the draft knows again. Refitted to that run (eagle3TextG:
// known text 0.73, 0.63, 0.60 by position, left after 7.5 tokens on
// average; unknown text 0, left after 3.5), with its passes and its
// draft calls by length, the text simulation gives 1.225x adaptive
// against k = 1's 1.228x. Lengths 2 and 4-7 cost 5.4-7.5 ms a round
// there against 4.7 for 3: the warm-up's seed prices them, and the
// Chooser drafted them in about 2% of the rounds, after runs of full
// acceptance on thin evidence. Seeded, they were priced at the warm-up's
// timing and corrected 6% a round at most; the Chooser's own settle
// measurements of a seeded size now replace its seed (Seed). Simulated
// with seeds of 0.16 ms a step against those costs, 1.200x before and
// 1.205x after (1.230x seeded right); taking the first measurement
// alone made 1.218x, but the model draft at T = 0.7, whose passes cost
// more with each token sampled, fell from 2.109x to 2.061x.
//
// Why a spell that paid steps down before it stops (hold). Text the
// draft does not know is a dip of a few tokens more often than a
// collapse; turned off, drafting waits ProbeAfter rounds for a probe,
// and the text is back well before. So drafting that has stayed on
// ProbeAfter rounds, when its estimate first says stop, drafts one token
// (the cheapest round: on the 8B target it loses a fifth of a round
// alone when nothing is accepted) for hold more rounds, and stops only
// if the estimate still says so. TestChooserStepsDownThroughDips: after
// dips of 8-12 rounds, 198 rounds without a draft in 250 dips where it
// was 399 (1.266x against 1.258x); the text simulations, EAGLE-3 1.159x
// (old fit) and 1.230x (refit, k = 1 1.228x) where they were 1.151x and
// 1.225x, the model draft at T = 0.7 2.107x (2.100x), lowest repetition
// 1.14x (1.16x, within the 200 loads' noise). Two rounds and not more:
// a collapse must still turn drafting off within ten rounds
// (TestChooserAcceptanceCollapses: eight before, ten now; three made
// eleven); three or four rounds added 0.2-0.6% more in the simulations.
// On the H200 this branch made 1.17x (1.12-1.21) on the known greedy row,
// within the spread of the last two runs (1.12x, 1.19x), and 1.07x
// (1.06-1.08) on jargon, where they made 1.03x and 1.06x (k = 1: 1.11x).
//
// host1 and host0 are the time a round that drafts, and one that does not,
// spends outside its draft and target calls: the host's work between
// them (emitting tokens, starting the next round) and whatever the calls'
// timing misses. It is measured as each round's wall time less its
// calls'. On a large target it is noise; on a launch-bound one (the demo
// pair on a GPU, 0.2 ms a pass) a drafting round's share of it decides
// whether drafting pays: priced by its calls alone, DFlash on the demo
// pair drafted at an expected 1.03x and ran at 0.92x.
//
// Costs are running averages (weight Alpha for each new measurement) of
// whole calls, indexed by size: draft calls by the steps they ran, target
// passes by their rows. Sizes not yet measured are estimated from the
// measured ones (a draft call scales with its steps; a verification is
// interpolated between measured row counts, and past the largest it
// grows at the slope between the two largest, or stays flat with one).
// A size's first runs on a GPU compile and capture its program, so they
// bound its cost from above and no more (curve): when a length whose
// sizes are not yet settled would beat the choice by Margin at the
// costs the settled sizes give it (curve.hoped), it is drafted to
// measure it, settle rounds in the Chooser's life at most. Without that,
// one first run of the H200's two-row verification (twice its cost)
// priced every length under 4 above 4, and an EAGLE-3 draft that pays
// 1.21x at k = 1 drafted 4 tokens a round until acceptance dipped, then
// stayed off (1.01x).
//
// When drafting is off, nothing measures acceptance. After ProbeAfter
// rounds off, one round drafts again (a probe) and the decision is made
// afresh on what it saw; each probe that leaves drafting off doubles the
// wait, so a pair that does not pay spends few rounds probing, and one
// that starts to pay (the conversation turns to text the draft knows) is
// noticed. Rounds are not time, though: on a launch-bound target (the
// demo pair on a GPU) a probe's draft first catches up on every token it
// missed and may compile a new pass size, dozens of rounds' worth. So
// what probes lose against the target alone making their tokens is kept,
// net (a probe that made its tokens faster than the target alone would
// have pays for one that did not), and a due probe waits until that loss
// is within Budget (2%) of all the time measured.
//
// Why probes come back sooner than they did. Acceptance follows the
// text: on the H200's 8B target a model draft's first position was
// accepted 55% of the time after a round that accepted nothing and 95%
// after a full one (EAGLE-3's: 34% and 60%), and at T = 0.7 a request
// drafted a dozen rounds in a row whose first token was rejected. Such a
// run turns drafting off, rightly, and it ends when the text does. With
// waits doubling to 256 rounds on each failed probe, one collapse kept
// drafting off for three whole requests of 64 tokens (1.00x in a
// repetition whose siblings made 2.38x and 1.68x), and EAGLE-3, whose
// k = 1 rounds pay 1.19x, drafted in under half its rounds (1.09x).
// Three changes, each decided on the simulations of cost_text_test.go
// (a known and an unknown state of the text with the rates and the
// chances of leaving them fitted to those traces, the H200's measured
// costs, 200 fresh loads of nine 64-token requests each):
//   - A request's start (Begin) is new content: with drafting off a probe
//     is due at once and the wait starts over. A pair stuck off since a
//     collapse drafts again from the first round of the next request
//     (TestChooserProbesAtBegin: 20 of 20 seeds, none before).
//   - The wait doubles only up to what the budget pays for (longestWait):
//     a probe that accepts nothing every that many rounds, at what one
//     costs beyond the target alone (at least what probes lost in fact,
//     a draft's catch-up included). A probe of one token on the 8B
//     target costs 0.15 of a round alone, so the wait stays at ProbeAfter;
//     the demo pair's dear probes on a GPU still wait up to MaxProbeAfter.
//   - Both only where probes are cheap (cheapProbes): the pair has paid
//     (drafting stayed on three rounds in a row in the Chooser's life,
//     not one lucky probe; sixteen were too many: at k = 7 a request in
//     known text is a dozen rounds, and the lowest repetition fell back
//     to 0.99x), since the chance that new content pays is what these
//     probes buy; and the Budget pays for a probe that accepts nothing
//     within 32 rounds of the target alone, so that a probe at every
//     request's start costs about a percent. The demo pair on one CPU
//     thread fails both: full acceptance would pay there (sixteen rows
//     cost 4.7 one-row passes), but at the acceptance its text gives no
//     length does, and a probe loses 0.8 of a round alone (40 rounds'
//     budget). A launch-bound pair on a GPU
//     (0.2 ms a pass) fails the second. Both keep the doubling waits.
//   - A probe drafts one token (a block drafter's, whose pass costs
//     about the same whatever its length, the best length at an even
//     chance, as before). It asks whether the text is back where
//     the draft knows it, which its first position answers, at the least
//     cost; once it is, the choice that follows prices longer drafts on
//     the pooled evidence. (Probes of the best length at an even
//     chance, as before, made 2.114x on the model draft and 1.148x on
//     EAGLE-3, lowest repetitions 1.14x and 0.99x; of one token, 2.100x
//     and 1.155x, 1.16x and 0.99x: alike within the simulations' noise,
//     and one token is the cheaper probe where drafting does not pay.)
// Together, simulated: the model draft at T = 0.7 makes 2.100x where it
// made 2.085x (k = 7 fixed: 2.19x), and its lowest repetition of 200 is
// 1.16x, not 0.99x; EAGLE-3 1.151x where it made 1.130x (k = 1: 1.19x).
// What remains of the gap to a fixed length is the time off while the
// text is unknown, which a fixed length spends drafting at a small loss.
//
// Why a pair that could not pay even at full acceptance is still
// probed. Skipping its probes was tried (hprobe, judged at the hoped
// costs, re-judged when the target alone's cost moved) and taken out: a
// warm-up timed on a busy machine can price the verification of several
// rows high, and since nothing re-measures those sizes while drafting
// is off, the pair stayed off for the whole load; and the engine's tests
// of the draft paths on one CPU thread drafted nothing on some runs.
// Probes there cost about 1% of the rounds (doubling waits).
// The first rounds' measurements (the first round, each length's first
// runs) are not counted: they are bounded by count, happen once in a
// Chooser's life, and on a GPU include compiling and capturing each pass
// size, which would hold probes back for thousands of rounds after.
//
// What a probe costs, all of it. On the H200's demo pair (0.18 ms a token
// alone) EAGLE-3 and DFlash lost 2-4% while drafting in 1% of the rounds
// (probes), against a Budget of 2%: the budget counted a probe round's
// calls, not what else the probe caused. Read from the bench's rounds
// (spec-demo.json; a row is about 2,300 rounds, 450 ms): the probes
// themselves 5-6 ms (0.3-0.5 ms each beyond the target alone: the draft's
// catch-up and a two-row pass), the rounds drafting after a probe that
// accepted 4-9 ms (each length's first run in the load, 1.9-2.4 ms where
// 0.36 is the rule, in a spell of a few rounds that lost), the captures
// before probes 0.1-0.2 ms; the rest is the noise of the rounds without a
// draft (as wide in a second load of the target alone). So:
//   - A probe's loss is its round's wall time (the host's work outside the
//     calls included) less its tokens at the target alone's time a token,
//     and spent is wall time.
//   - A one-row pass that captures while drafting is off (the rounds
//     before a probe: VerifiedCapturing) charges its round's loss.
//   - A probe of a pair that has not paid begins a trial: the drafting it
//     turns on is charged round by round until the spell has lasted
//     settle rounds (paid) or goes off, so the first runs of the lengths
//     a lucky probe drafts are the probe's cost. First runs at the
//     Chooser's start, or once the pair has paid, are still not charged
//     (above; TestChooserDearFirstRunsLeaveProbes).
//   - The draft's reading of a prompt whose first round is a probe, or a
//     trial's, is charged (DraftPrefilled).
//   - A pair that has not gained, that is never drafted settle rounds in
//     a row making its tokens faster than the target alone as measured
//     (spell), probes on a quarter of Budget (allowance): its probes buy
//     only the chance that the text turns to what the draft knows. Not
//     paid, which counts estimates: on the demo pair a lucky probe in
//     text the draft knows kept EAGLE-3 on for 5-12 rounds at a loss. The
//     first probe is always afforded: nothing is known of the acceptance
//     before it, captures may already have lost, and the engine's tests
//     of the draft paths on one CPU thread need it (TestRunCPUMoE).
// Simulated with the demo pair's H200 costs (TestChooserNeverPaying-
// ProbesCostAPercent: first runs 1.7 ms, 40 fresh loads of nine requests
// of 256 tokens): 0.983x the target alone before (lowest load 0.978x),
// 0.994x after (0.987x). Every cost charged but on the whole Budget it
// is 0.980x (the budget then spent to the last), without the captures'
// charge 0.992x. The text simulations do not move (model draft at
// T = 0.7 2.102x, lowest repetition 1.16x; EAGLE-3 1.150x).
//
// A block drafter (DFlash) proposes k tokens in one pass whose cost grows
// little with k: with Block its calls are measured by k and sizes not yet
// measured are estimated between measured ones (as verification is), not
// scaled from one step, so the block's length is chosen from that one
// pass's cost.
//
// How the engine feeds it (engine/generate.go). A Runner keeps one
// Chooser per kind of drafting, greedy (on the device) and through the
// host (sampled, penalised, or masked by a grammar), for the pair and
// device layout it loaded:
// costs belong to the layout, and acceptance evidence carries over between
// requests and decays. Per request, after the prompt's prefill,
// ch.Begin(); per round:
//
//	k := ch.Next(limit)            // limit: the request's draft max
//	t := ch.Now()
//	if k > 0 {
//		p := draft(k)              // model, EAGLE-3 or lookup drafter
//		t = t.Add(ch.Drafted(t, steps)) // steps: the draft's forward
//		                           // passes, 0 when it caught up on
//		                           // rounds it sat out
//	}
//	out := verify(p)               // the target pass of len(p)+1 rows
//	ch.Verified(t, len(p)+1)
//	ch.Accepted(tried, len(out)-1) // tried: drafts proposed or cut by p-min
//
// The draft's timing is the whole draft call (an EAGLE-3 draft's catch-up
// on the target's new states included); the verification's is the whole
// target call with the accept/reject on the host (an EAGLE-3 target pass
// includes capturing and fusing its states). The clock is read once to
// start a round and once at the end of each call, so that a clock whose
// reading costs (a test's) adds the same to every round, drafting or
// not; the time between one round's pass and the next round's start is
// the round's time outside its calls. A drafted token the draft's
// confidence cut counts as rejected. The decision goes into the step
// statistics: the chat's stats line and `tandem run --json` show k,
// whether drafting is on, why not, and the measured speedup.

import (
	"math"
	"time"
)

// ReasonCosts is why drafting is off when it does not pay.
const ReasonCosts = "drafting costs more than it saves on this pair"

// CostOptions configure a Chooser; zero fields take the defaults.
type CostOptions struct {
	MaxK          int     // most tokens drafted in a round (8)
	StartK        int     // k of the first round, before any measurement (4)
	Margin        float64 // the gain over the target alone drafting must promise (0.03)
	Alpha         float64 // weight of a new cost measurement (0.25)
	Forget        float64 // per-round decay of acceptance evidence (0.85)
	ProbeAfter    int     // rounds off before the first re-probe (16)
	MaxProbeAfter int     // the longest wait between probes (256)
	Recalibrate   int     // re-measure the target alone after this many rounds without a one-row pass (64)
	// Budget is the share of the measured time that probes (rounds
	// drafting only to measure while drafting is off) may lose against
	// the target alone (0.02); see Chooser.
	Budget float64
	// Block says a draft call of k tokens is one pass whatever k (a
	// DFlash block): its cost is measured by k and estimated between
	// the measured lengths, not scaled from one step by k.
	Block bool
	Now   func() time.Time // the clock (time.Now)
}

func (o *CostOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxK, 8)
	def(&o.StartK, 4)
	def(&o.ProbeAfter, 16)
	def(&o.MaxProbeAfter, 256)
	def(&o.Recalibrate, 64)
	o.StartK = min(o.StartK, o.MaxK)
	o.MaxProbeAfter = max(o.MaxProbeAfter, o.ProbeAfter)
	if o.Margin <= 0 {
		o.Margin = 0.03
	}
	if o.Alpha <= 0 || o.Alpha > 1 {
		o.Alpha = 0.25
	}
	if o.Forget <= 0 || o.Forget >= 1 {
		o.Forget = 0.85
	}
	if o.Budget <= 0 || o.Budget >= 1 {
		o.Budget = 0.02
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Decision is the Chooser's current choice and what it rests on.
type Decision struct {
	K        int    `json:"k"`                // tokens to draft in the next round
	Drafting bool   `json:"drafting"`         // K > 0
	Reason   string `json:"reason,omitempty"` // why drafting is off
	Probe    bool   `json:"probe,omitempty"`  // the next round drafts only to re-measure
	// Acceptance is the estimated chance that a drafted token is
	// accepted, pooled over the positions (the choice prices each
	// position by its own evidence beside it).
	Acceptance float64 `json:"acceptance"`
	// DraftStep and Verify1 are the measured cost of one draft step and of
	// a one-row target pass (the target alone); Verify1 is 0 until
	// one-row passes were timed past their first runs (which on a GPU
	// compile and capture the pass).
	DraftStep time.Duration `json:"draft_step_ns"`
	Verify1   time.Duration `json:"verify_1_ns"`
	// Alone is the target alone's time a token: Verify1 and the time a
	// round without a draft spends outside its pass; 0 with Verify1.
	Alone time.Duration `json:"alone_ns"`
	// ExpectedSpeedup is tokens per second drafting K (or, when off, the
	// best K) over the target alone, by the current estimates.
	ExpectedSpeedup float64 `json:"expected_speedup"`
}

// Chooser picks how many tokens to draft from measured costs and
// acceptance. Its methods are called from one goroutine.
type Chooser struct {
	o CostOptions

	draft  curve // draft call duration by steps
	verify curve // target pass duration by rows

	// Acceptance evidence, decayed (see learn): succ and fail pooled
	// over every drafted position (the geometric fit); kept[i] and
	// tried[i] position i's own (1..MaxK), the times it was accepted and
	// reached (every position before it accepted). rates is the estimate
	// by position the last choice rested on, flat a scratch for a flat
	// rate; shrink, the pseudo-trials at the pooled rate in each
	// position's estimate.
	succ, fail  float64
	kept, tried []float64
	rates, flat []float64
	shrink      float64
	seen        int // round of the last evidence
	round       int // rounds finished

	k        int  // the choice for the next round
	probe    bool // the next round is a probe
	on       bool // drafting pays (probe and recalibration rounds aside)
	streak   int  // rounds on since drafting last turned on
	held     int  // rounds of one token since the estimate last said stop (hold)
	off      int  // rounds off since drafting went off or the last probe
	wait     int  // rounds off before the next probe
	lastOne  int  // round of the last one-row pass
	decision Decision
	// The probe budget: took is the time of the round under way (its
	// draft and target calls); spent, the time of every round; lost,
	// what probe rounds (explore) cost beyond the target alone making
	// their tokens.
	took, spent, lost time.Duration
	explore           bool
	probes            int // probes taken (for what one loses on average)
	// paid says drafting has stayed on settle rounds in a row in this
	// Chooser's life: the pair can pay, on some text. Only such a pair
	// probes at a request's start and waits no longer than the budget
	// pays for (longestWait). gained says such a spell also made its
	// tokens faster than the target alone would have, as measured
	// (spell: what the spell under way lost, net): only then do probes
	// have the whole Budget (allowance).
	paid, gained bool
	spell        time.Duration
	// trial says drafting is on since a probe of a pair that has not
	// paid: its rounds are the probe's cost (the first runs of the
	// lengths it drafts included) until it pays or goes off.
	trial bool
	// charge says the round under way counts in lost though it is no
	// probe: its pass captured states for a draft while drafting is off
	// (the rounds before a probe).
	charge bool
	// remeasured counts the rounds drafting k only to measure k's
	// unsettled costs (decide).
	remeasured []int
	// ended is when the last round ended (zero at a request's start,
	// Begin); between[1] and between[0] are running averages of the time
	// rounds that drafted and rounds that did not spent outside the
	// draft and target calls (the host's work between them), with
	// their counts.
	ended   time.Time
	between [2]float64
	nb      [2]int
	// passEnd is when the round's target pass ended; last, the wall time
	// of the last round (its calls alone for a request's first).
	passEnd time.Time
	last    time.Duration
}

// NewChooser returns a Chooser that starts by drafting o.StartK tokens.
func NewChooser(o CostOptions) *Chooser {
	o.defaults()
	c := &Chooser{o: o, k: o.StartK, wait: o.ProbeAfter, lastOne: -1, remeasured: make([]int, o.MaxK+1), shrink: shrink}
	c.kept, c.tried = make([]float64, o.MaxK+1), make([]float64, o.MaxK+1)
	c.rates, c.flat = make([]float64, o.MaxK+1), make([]float64, o.MaxK+1)
	c.draft.init(o.MaxK+1, o.Alpha)
	c.verify.init(o.MaxK+2, o.Alpha)
	c.decide()
	return c
}

// Costs are a pair's call durations by size, measured apart from its
// rounds (the engine's warm-up at load): Draft[k] is a draft call of k
// steps (a block of k with Block), Verify[r] a target pass of r rows; a
// zero is a size not measured.
type Costs struct {
	Draft, Verify []time.Duration
}

// Seed takes costs measured past their first runs (on a GPU, each size's
// first runs compile and capture its program) as settled measurements,
// and decides the next round on them. Seeded before the first round with
// a one-row pass and a one-step draft call, the Chooser no longer drafts
// StartK blind: its first round drafts the best length for the prior
// acceptance where that pays, and leaves drafting off where it does not.
// Sizes not seeded are estimated from the seeded ones as from measured
// ones; sizes out of range and zeros are ignored. A seed stands until
// settle of the Chooser's own measurements of its size, whose fastest
// then replaces it: the warm-up times each call apart, and a round's may
// cost otherwise (on the H200's 8B pair, EAGLE-3 drafts of two steps and
// of four to seven cost 1.6-2.9 ms in the rounds, where three steps cost
// 0.49. The Chooser still drafted them now and then, two where two
// cannot beat three at those costs, so it priced them lower: a
// measurement of a settled size moves it 6% at most).
func (c *Chooser) Seed(s Costs) {
	seed := func(cv *curve, ds []time.Duration) {
		for size, d := range ds {
			if size > 0 && size < len(cv.avg) && d > 0 {
				cv.seed(size, d)
			}
		}
	}
	seed(&c.draft, s.Draft)
	seed(&c.verify, s.Verify)
	c.decide()
}

// seeded reports whether the costs a first round decides on are settled:
// the target alone's and a one-token draft's (Seed).
func (c *Chooser) seeded() bool { return c.verify.settled(1) && c.draft.settled(1) }

// Now reads the Chooser's clock.
func (c *Chooser) Now() time.Time { return c.o.Now() }

// Drafted records a draft call that began at start and ran steps draft
// steps (forward calls), and returns how long it took. A call of no steps
// is timed but not recorded: one that did more than a round's work
// (catching up after rounds without drafting) says nothing of a round's
// cost.
func (c *Chooser) Drafted(start time.Time, steps int) time.Duration {
	d := c.o.Now().Sub(start)
	c.took += d
	if steps > 0 && steps < len(c.draft.avg) {
		c.draft.add(steps, d)
	}
	return d
}

// Verified records a target pass of rows rows that began at start, and
// returns how long it took.
func (c *Chooser) Verified(start time.Time, rows int) time.Duration {
	return c.verified(start, rows, false)
}

// VerifiedCapturing is Verified for a pass that also captured states for
// a draft that reads the target's (EAGLE-3, DFlash) while this round did
// not draft (the rounds before a probe, a recalibration while drafting is
// on). Such a pass is not what the target alone costs: its copies and
// the draft's encoding of them make a one-row pass on a launch-bound
// target a tenth dearer or more, and counted as the target alone they
// made drafting that lost look like a gain. A one-row pass so timed
// counts in the round but not in the one-row cost.
func (c *Chooser) VerifiedCapturing(start time.Time, rows int) time.Duration {
	return c.verified(start, rows, rows == 1)
}

func (c *Chooser) verified(start time.Time, rows int, apart bool) time.Duration {
	c.passEnd = c.o.Now()
	d := c.passEnd.Sub(start)
	c.took += d
	if apart && !c.on {
		c.charge = true // a capture before a probe: the probe's cost
	}
	if rows > 0 && rows < len(c.verify.avg) {
		if !apart {
			c.verify.add(rows, d)
		}
		if rows == 1 {
			c.lastOne = c.round
		}
	}
	return d
}

// Begin starts a request: the time until its first round ends (the
// prompt's prefill) is no round's. A new prompt is new content: with
// drafting off, a probe is due at once (the budget and the pair's hope
// permitting) and the wait between probes starts over.
func (c *Chooser) Begin() {
	c.ended = time.Time{}
	if c.on || c.k > 0 || !c.verify.settled(1) {
		return
	}
	if _, cheap := c.cheapProbes(); !cheap {
		return
	}
	c.wait = c.o.ProbeAfter
	if c.affords() {
		c.startProbe()
		c.decision.K, c.decision.Drafting, c.decision.Probe = c.k, true, true
	}
}

// startProbe makes the next round a probe (probeK tokens) and restarts
// the count of rounds off.
func (c *Chooser) startProbe() {
	c.k, c.probe, c.explore, c.off = c.probeK(), true, true, 0
	c.trial = !c.paid
	c.probes++
}

// probeK is the length a probe drafts: one token (the package comment
// says why), but for a block drafter, whose pass costs about the same
// whatever its length: the best length at an even chance of acceptance.
func (c *Chooser) probeK() int {
	if !c.o.Block {
		return 1
	}
	pk, _ := c.best(c.flatRates(0.5))
	return max(1, pk)
}

// longestWait is the most rounds off worth waiting between probes: for
// a pair whose probes are cheap (cheapProbes), the rounds of the target
// alone whose Budget pays for a probe that accepts nothing, at least
// ProbeAfter; otherwise MaxProbeAfter, the waits doubling to it. Where a
// probe costs little beside a round of the target alone (a cheap draft on
// a large target), waiting longer only keeps drafting off after the text
// has turned back to what the draft knows; where it costs much, probes
// are rarer.
func (c *Chooser) longestWait() int {
	w, ok := c.cheapProbes()
	if !ok {
		return c.o.MaxProbeAfter
	}
	return max(c.o.ProbeAfter, w)
}

// cheapProbes reports whether probing at each request's start and with
// waits that stop doubling is worth it: the pair has paid (paid), and the
// Budget pays for a probe that accepts nothing within 2 ProbeAfter rounds
// of the target alone, so that even a probe at the start of every request
// costs about a percent. w is that many rounds.
func (c *Chooser) cheapProbes() (w int, ok bool) {
	if !c.paid {
		return 0, false
	}
	k := c.probeK()
	loss := c.draftCost(k) + c.verify.at(k+1) + c.outside(1) - c.alone()
	if c.probes > 0 {
		// What probes lost in fact: a draft's catch-up included.
		loss = max(loss, float64(c.lost)/float64(c.probes))
	}
	r := math.Ceil(loss / (c.o.Budget * c.alone()))
	if math.IsNaN(r) || r > float64(2*c.o.ProbeAfter) {
		return 0, false
	}
	return int(r), true
}

// Accepted ends a round in which drafted tokens were proposed and accepted
// of them kept, and chooses the next round's k.
func (c *Chooser) Accepted(drafted, accepted int) {
	// The round ends with its target pass: reading the clock here would
	// only add its own cost.
	now := c.passEnd
	c.last = c.took
	if !c.ended.IsZero() && !now.IsZero() {
		c.last = max(c.took, now.Sub(c.ended))
		// The round's time outside its calls: what the engine does on
		// the host between them (emitting the last round's tokens,
		// starting this one), and any wait the calls' timing missed.
		i := min(drafted, 1)
		v := float64(max(0, now.Sub(c.ended)-c.took))
		if c.nb[i] == 0 {
			c.between[i] = v
		} else {
			// A stall counts at most a quarter of the calls' time (or
			// of the average, where that is more) above the average
			// (curve.add says why).
			c.between[i] += c.o.Alpha * (min(v, c.between[i]+(rise-1)*max(c.between[i], float64(c.took))) - c.between[i])
		}
		c.nb[i]++
	}
	c.ended, c.passEnd = now, time.Time{}
	if drafted > 0 {
		c.learn(drafted, accepted)
	}
	if c.verify.has(1) {
		// What the round lost against the target alone making its
		// tokens, on its wall time (the host's work outside the calls
		// included): a probe that made its tokens faster than the
		// target alone would have pays for one that did not.
		loss := c.last - time.Duration(float64(accepted+1)*c.alone())
		if c.on && drafted > 0 {
			c.spell += loss
		}
		if c.explore || c.charge || drafted > 0 && c.trial {
			c.lost += loss
		}
	}
	c.spent += c.last
	c.took, c.charge = 0, false
	c.round++
	c.decide()
}

// LastRound is the wall time of the round Accepted ended: its calls and
// the time since the round before ended (for a request's first round,
// its calls alone).
func (c *Chooser) LastRound() time.Duration { return c.last }

// Next is how many tokens to draft in the next round, at most limit.
func (c *Chooser) Next(limit int) int { return max(0, min(c.k, limit)) }

// Decision is the current choice with its reasons, for the user.
func (c *Chooser) Decision() Decision { return c.decision }

// MayDraftSoon reports whether one of the next lead+1 rounds may draft or
// probe, as far as the Chooser can tell before the round under way ends:
// drafting is on, this round drafts, or a probe falls due within lead+1
// rounds off and the probe budget would afford it by then (each round off
// adding about a one-row pass to the time spent). A false answer lets a
// head-sharing draft's target skip capturing states no round will read;
// the answer is a forecast, not a promise (a change in the measured costs
// may still turn drafting on at once), so a drafter must cope with states
// missing. The first rounds that time the target alone say false: they
// must time it without the capture (VerifiedCapturing), and the round
// after them drafts on what it finds.
func (c *Chooser) MayDraftSoon(lead int) bool {
	if c.on || c.k > 0 {
		return true
	}
	ahead := float64(max(0, lead) + 1)
	return c.off+int(ahead) >= c.wait && c.affordsBy(ahead*c.alone())
}

// Recalibrating reports that the next round times the target alone
// while drafting stays on (Recalibrate). A head-sharing draft's target
// pauses its capture for it: a pass that captures is not the target
// alone's (VerifiedCapturing), and with drafting on every other round
// captures, so nothing else would ever correct a one-row cost measured
// or seeded too high (on the H200's demo pair, a seed 1.8x too high kept
// DFlash drafting in 98% of rounds at 0.84-0.97x the target alone).
func (c *Chooser) Recalibrating() bool { return c.on && c.k == 0 }

// keep is what a position's evidence keeps of its weight at each later
// trial of the position: about its last ten trials count (the Chooser's
// comment says why ten and why trials, not rounds).
const keep = 0.9

// shrink is how many trials at the pooled rate each position's estimate
// counts beside its own (the Chooser's comment says why four).
const shrink = 4

// hold is how many rounds of one token a spell on that has lasted
// ProbeAfter rounds drafts after its estimate first says stop (the
// Chooser's comment says why two).
const hold = 2

// learn adds a round that drafted tokens, accepted of them in a row, to
// the evidence: pooled (accepted successes and, when a draft was
// rejected, one failure), and position by position (each position up to
// the first rejected one was reached; those up to accepted were kept).
// The pooled evidence ages by Forget a round; a position's by keep at
// each later trial of that position, and by Forget for each round since
// the last evidence that drafted nothing.
func (c *Chooser) learn(drafted, accepted int) {
	decay := math.Pow(c.o.Forget, float64(c.round-c.seen))
	c.succ = c.succ*decay + float64(accepted)
	c.fail *= decay
	if accepted < drafted {
		c.fail++
	}
	idle := math.Pow(c.o.Forget, float64(max(0, c.round-c.seen-1)))
	c.seen = c.round
	reached := min(accepted+1, drafted)
	for i := 1; i < len(c.kept); i++ {
		w := idle
		if i <= reached {
			w *= keep
		}
		c.kept[i] *= w
		c.tried[i] *= w
		if i <= reached {
			c.tried[i]++
		}
		if i <= accepted {
			c.kept[i]++
		}
	}
}

// acceptance is the pooled per-token acceptance estimate: the geometric
// fit's, S / (S + F) with a Beta(1, 1) prior.
func (c *Chooser) acceptance() float64 {
	return min(0.99, (c.succ+1)/(c.succ+c.fail+2))
}

// estimate fills c.rates with each position's acceptance given those
// before it accepted: its own evidence beside shrink trials at the
// pooled rate p, so that a position rarely reached (or never) takes p.
func (c *Chooser) estimate(p float64) []float64 {
	for i := 1; i < len(c.rates); i++ {
		c.rates[i] = p
		if n := c.tried[i] + c.shrink; n > 0 {
			c.rates[i] = min(0.99, (c.kept[i]+c.shrink*p)/n)
		}
	}
	return c.rates
}

// flatRates is c.flat filled with a.
func (c *Chooser) flatRates(a float64) []float64 {
	for i := range c.flat {
		c.flat[i] = a
	}
	return c.flat
}

// expected is E(k): the tokens a round drafting k makes, at acceptance
// rates by position (rates[i] for position i given those before it).
func expected(rates []float64, k int) float64 {
	e, run := 1.0, 1.0
	for i := 1; i <= k; i++ {
		run *= rates[i]
		e += run
	}
	return e
}

// draftCost estimates a draft call of k tokens: k steps, each a pass, or
// one pass of a block of k (Block).
func (c *Chooser) draftCost(k int) float64 {
	if c.o.Block {
		return c.draft.at(k)
	}
	return c.draft.proportional(k)
}

// affords reports whether a probe fits the budget: what probes lost so
// far is within the allowance of all the time measured. A pair where
// measuring is dear (a launch-bound target whose draft must first catch
// up, or compile a new pass size) then probes less often, however the
// rounds count.
func (c *Chooser) affords() bool { return c.affordsBy(0) }

// affordsBy is affords once ahead more nanoseconds are spent. The first
// probe is always afforded: nothing is known of the pair's acceptance
// before it, and a warm-up or a capture before it may already have lost.
func (c *Chooser) affordsBy(ahead float64) bool {
	return c.probes == 0 || float64(c.lost) <= c.allowance()*(float64(c.spent)+ahead)
}

// allowance is the share of the measured time probes may lose: Budget
// for a pair that has paid, a quarter of it for one that has not (whose
// probes are bought only by the chance that the text turns to what the
// draft knows).
func (c *Chooser) allowance() float64 {
	if c.gained {
		return c.o.Budget
	}
	return c.o.Budget / 4
}

// DraftPrefilled charges a draft's reading of a request's prompt, begun
// at start, to the probe budget when the request's first round is a
// probe (Begin) or drafts in a spell a probe began (trial): the target
// alone would not have spent it. Its time counts as measured either way.
func (c *Chooser) DraftPrefilled(start time.Time) {
	d := c.o.Now().Sub(start)
	if c.explore || c.trial {
		c.lost += d
	}
	c.spent += d
}

// hopedCost is draftCost(k) plus the verification of k+1 rows, each at
// its hoped cost (curve.hoped): what k would cost if its sizes not yet
// settled cost what the settled ones say.
func (c *Chooser) hopedCost(k int) float64 {
	d := c.draft.hopedSteps(k)
	if c.o.Block {
		d = c.draft.hoped(k)
	}
	return d + c.verify.hoped(k+1)
}

// outside is the time a round spends outside its calls: drafting (1) or
// not (0), as measured. Drafting rounds not yet measured take the other
// kind's; rounds without a draft not yet measured take none: a drafting
// round's host work is more, and taken for the target alone's it would
// price the target alone high and drafting above its worth, in a Chooser
// seeded to draft from its first round (Seed) for dozens of rounds.
func (c *Chooser) outside(drafting int) float64 {
	switch {
	case c.nb[drafting] > 0:
		return c.between[drafting]
	case drafting == 1 && c.nb[0] > 0:
		return c.between[0]
	}
	return 0
}

// alone is the target alone's time a token: a one-row pass and the time
// a round without a draft spends outside it.
func (c *Chooser) alone() float64 { return c.verify.at(1) + c.outside(0) }

// best is the k in 1..MaxK with the most tokens per second at the
// acceptance rates by position, and that rate in tokens per nanosecond.
func (c *Chooser) best(a []float64) (int, float64) {
	return c.bestBy(a, func(k int) float64 { return c.draftCost(k) + c.verify.at(k+1) })
}

// bestBy is best with the round's cost given by cost.
func (c *Chooser) bestBy(a []float64, cost func(k int) float64) (int, float64) {
	bestK, bestRate := 0, 0.0
	for k := 1; k <= c.o.MaxK; k++ {
		cost := cost(k) + c.outside(1)
		if cost <= 0 {
			continue
		}
		if r := expected(a, k) / cost; r > bestRate {
			bestK, bestRate = k, r
		}
	}
	return bestK, bestRate
}

// decide sets the next round's k after the round that just ended.
func (c *Chooser) decide() {
	p := c.acceptance()
	a := c.estimate(p)
	d := Decision{Acceptance: p, DraftStep: time.Duration(c.draftCost(1))}
	if c.verify.settled(1) {
		d.Verify1 = time.Duration(c.verify.at(1))
		d.Alone = time.Duration(c.alone())
	}
	probed := c.probe
	c.probe, c.explore = false, false
	switch {
	case c.round == 0 && !c.seeded():
		c.k = c.o.StartK // nothing measured yet: draft, to measure
	case !c.verify.settled(1) && !c.on:
		c.k = 0 // the target alone is not timed past its first runs: time it
	case c.on && c.round-c.lastOne >= c.o.Recalibrate:
		c.k = 0 // time the target alone again; drafting stays on
	default:
		k, rate := c.best(a)
		alone := 1 / c.alone()
		d.ExpectedSpeedup = rate / alone
		// Hysteresis: drafting turns on when it promises Margin more than
		// the target alone, and stays on until it promises Margin less.
		// The acceptance estimate follows a few rounds (Forget), so near
		// break-even it wanders across one threshold every few rounds;
		// each turn off costs the probes' waits before drafting is back.
		need := 1 + c.o.Margin
		if c.on {
			need = 1 - c.o.Margin
		}
		// A length whose sizes are not settled may cost less than its
		// first runs say (they compile and capture): when it would beat
		// the choice by Margin at the settled sizes' costs, it is drafted
		// to measure it, settle rounds in the Chooser's life at most.
		hk, hr := c.bestBy(a, c.hopedCost)
		explore := hk > 0 && hk != k && hr > rate*(1+c.o.Margin) && hr > alone*need &&
			c.remeasured[hk] < settle && !(c.draft.settled(hk) && c.verify.settled(hk+1))
		pays := k > 0 && rate > alone*need
		switch {
		case pays:
			c.held = 0
		case c.on && c.streak >= c.o.ProbeAfter && c.held < hold:
			// A spell that paid steps down to one token before it stops:
			// the text may come back within the dip (the package
			// comment says why, and why hold rounds).
			c.held++
			k, pays = 1, true
		}
		switch {
		case explore:
			c.remeasured[hk]++
			c.k = hk
			c.probe, c.explore = probed, probed
		case pays:
			if !c.on {
				c.on, c.streak, c.spell = true, 0, 0
			}
			c.streak++
			c.paid = c.paid || c.streak >= settle
			c.gained = c.gained || c.streak >= settle && c.spell < 0
			c.trial = c.trial && !c.paid
			c.k = k
		case k > 0 && !(c.draft.settled(k) && c.verify.settled(k+1)) && c.remeasured[k] < settle:
			// The costs that say no include first runs of their sizes (a
			// GPU compiles and captures each new pass size): draft k
			// again to measure it before believing them. A round may
			// draft fewer than k (a cut, the end of a grammar), so each k
			// gets settle such rounds in the Chooser's life at most.
			c.k = k
			c.remeasured[k]++
			c.probe, c.explore = probed, probed
		case c.on || probed:
			// Drafting stopped paying, or a probe found it still does not.
			// A spell on that did not last (one probe's evidence is thin)
			// counts as a failed probe: the next one waits twice as long.
			if c.on && c.streak >= c.o.ProbeAfter {
				c.wait = c.o.ProbeAfter
			} else {
				c.wait = min(2*c.wait, c.longestWait())
			}
			c.on, c.k, c.off, c.trial = false, 0, 0, false
		default:
			// A probe is due after wait rounds off, and taken when the
			// budget affords it; until then the count goes on.
			c.k = 0
			if c.off++; c.off >= c.wait && c.affords() {
				c.startProbe()
			}
		}
	}
	d.K, d.Drafting, d.Probe = c.k, c.k > 0, c.probe
	if !c.on && (c.round > 0 || c.seeded()) && c.verify.settled(1) {
		d.Reason = ReasonCosts
	}
	if c.k > 0 && c.verify.has(1) {
		d.ExpectedSpeedup = expected(a, c.k) / (c.draftCost(c.k) + c.verify.at(c.k+1) + c.outside(1)) * c.alone()
	}
	c.decision = d
}

// curve is a running average of durations by size (steps or rows), in
// nanoseconds, with estimates for sizes not measured.
//
// The first runs of a size are often slow for reasons that do not recur:
// a GPU backend compiles a program on its first run and captures it as a
// graph on its second, and every new row count or draft length is a new
// program. So the first settle measurements of a size keep the smallest,
// and later ones count at most a quarter above the average (rise): a
// stall of the host is not a cost. At twice the average, a CPU whose
// rounds stalled now and then (a one-row pass of 1.5 ms taking 2.5-10)
// held the target alone at 2.3-3.2 ms, drafting looked like a gain, ran
// at 0.83-0.92x the target alone, and no round without a draft came to
// correct it. A real rise of cost is still followed, by Alpha times a
// quarter (6%) a measurement, and a fall by Alpha.
type curve struct {
	avg   []float64
	n     []int
	alpha float64
	// own counts a seeded size's measurements (-1: not seeded, or its
	// seed already replaced), first their fastest (replaceSeed).
	own   []int
	first []float64
}

// settle is how many first measurements of a size keep their minimum.
const settle = 3

// rise is the most a measurement counts as, over the average it updates.
const rise = 1.25

func (c *curve) init(sizes int, alpha float64) {
	c.avg, c.n, c.alpha = make([]float64, sizes), make([]int, sizes), alpha
	c.own, c.first = make([]int, sizes), make([]float64, sizes)
	for i := range c.own {
		c.own[i] = -1
	}
}

// seed takes d as size's settled cost (Chooser.Seed) until settle of the
// Chooser's own measurements of it replace it (replaceSeed).
func (c *curve) seed(size int, d time.Duration) {
	c.avg[size], c.n[size] = float64(d), max(c.n[size], settle)
	c.own[size] = 0
}

func (c *curve) add(size int, d time.Duration) {
	v := float64(d)
	if c.own[size] >= 0 {
		// A seeded size: the seed stands until settle measurements of
		// its own, whose fastest then replaces it, dearer or cheaper
		// (replaceSeed: the warm-up's timing is not the rounds').
		if c.own[size] == 0 || v < c.first[size] {
			c.first[size] = v
		}
		if c.own[size]++; c.own[size] == settle {
			c.avg[size], c.own[size] = c.first[size], -1
		}
		c.n[size]++
		return
	}
	switch n := c.n[size]; {
	case n == 0:
		c.avg[size] = v
	case n < settle:
		c.avg[size] = min(c.avg[size], v)
	default:
		c.avg[size] += c.alpha * (min(v, rise*c.avg[size]) - c.avg[size])
	}
	c.n[size]++
}

func (c *curve) has(size int) bool { return size < len(c.n) && c.n[size] > 0 }

// settled reports whether size has been measured past its first runs.
func (c *curve) settled(size int) bool { return size < len(c.n) && c.n[size] >= settle }

// at estimates the duration at size from every measured size: measured,
// interpolated between the nearest measured sizes, flat below the
// smallest, and past the largest extended at the slope of the two
// largest (never decreasing). 0 when nothing is measured.
func (c *curve) at(size int) float64 {
	v, _ := c.between(size, 1)
	return v
}

// hoped is at's estimate hoping a size not yet settled costs what the
// settled sizes say: the smaller of its first runs' fastest (which may
// include compiling and capturing its program: they bound its cost from
// above, no more) and the estimate from the settled sizes alone. With
// no settled size it is at.
func (c *curve) hoped(size int) float64 { return c.hopedBy(size, c.between) }

// hopedBy is hoped with the sizes' estimate from the sizes measured at
// least need times given by estimate (between, or scaled for draft
// steps); with none settled it is estimate's from every measured size,
// as at and proportional are.
func (c *curve) hopedBy(size int, estimate func(size, need int) (float64, bool)) float64 {
	if c.settled(size) {
		return c.avg[size]
	}
	est, ok := estimate(size, settle)
	switch {
	case !ok && c.has(size):
		return c.avg[size]
	case !ok:
		v, _ := estimate(size, 1)
		return v
	case c.has(size):
		return min(est, c.avg[size])
	}
	return est
}

// between estimates the duration at size from the sizes measured at
// least need times, as at does from every measured one; ok is false
// when there are none. (The Chooser estimates every length each round:
// scans, not lists, keep a round free of allocations.)
func (c *curve) between(size, need int) (v float64, ok bool) {
	lo, hi := -1, -1 // the nearest such sizes at or below size, and at or above
	for s, n := range c.n {
		if n < need {
			continue
		}
		if s <= size {
			lo = s
		}
		if s >= size {
			hi = s
			break
		}
	}
	switch {
	case lo < 0 && hi < 0:
		return 0, false
	case lo == size || lo < 0:
		return c.avg[max(lo, hi)], true
	case hi >= 0:
		f := float64(size-lo) / float64(hi-lo)
		return c.avg[lo] + f*(c.avg[hi]-c.avg[lo]), true
	}
	prev := -1 // past the largest: the slope from the one before it
	for s := lo - 1; s >= 0; s-- {
		if c.n[s] >= need {
			prev = s
			break
		}
	}
	if prev < 0 {
		return c.avg[lo], true
	}
	slope := max(0, (c.avg[lo]-c.avg[prev])/float64(lo-prev))
	return c.avg[lo] + slope*float64(size-lo), true
}

// proportional estimates a draft call of size steps: measured, or scaled
// from the nearest measured size in proportion to the steps (each draft
// step is a forward pass of its own).
func (c *curve) proportional(size int) float64 {
	if c.has(size) {
		return c.avg[size]
	}
	v, _ := c.scaled(size, 1)
	return v
}

// hopedSteps is proportional hoping as hoped does: a size not settled is
// the smaller of its first runs and the scaling of the nearest settled
// size.
func (c *curve) hopedSteps(size int) float64 { return c.hopedBy(size, c.scaled) }

// scaled is the average of the size measured at least need times nearest
// size (the smaller of two as near), scaled to size steps; ok is false
// when there is none.
func (c *curve) scaled(size, need int) (float64, bool) {
	near := -1
	for s, n := range c.n {
		if n >= need && (near < 0 || abs(s-size) < abs(near-size)) {
			near = s
		}
	}
	if near <= 0 {
		return 0, false
	}
	return c.avg[near] * float64(size) / float64(near), true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
