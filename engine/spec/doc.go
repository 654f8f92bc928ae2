// Package spec holds the pieces of speculative decoding that do not depend
// on how a model runs: whether a draft can serve a target (Compatible), the
// drafters that need no model (prompt lookup), the verification rules that
// keep the output exactly the target's (greedy matching and rejection
// sampling), and the controller that adapts how many tokens to draft.
//
// Rejection sampling (Leviathan et al., Chen et al. 2023): a drafted token x,
// drawn from the draft's distribution q, is accepted with probability
// min(1, p(x)/q(x)) where p is the target's distribution; on rejection the
// token is drawn from normalize(max(0, p - q)). The emitted token is then
// distributed exactly as p, whatever q is.
package spec
