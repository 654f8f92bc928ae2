package app

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tandem-run/tandem/engine"
)

// The sampling presets: the window's side panel and `tandem run --preset`
// offer the same three.
const (
	presetPrecise  = "precise"
	presetBalanced = "balanced"
	presetCreative = "creative"
)

// samplingPreset is a named set of sampling settings. Seed and the length
// of an answer are not part of a preset.
type samplingPreset struct {
	name  string
	about string // one line for people
	s     engine.Sampling
}

// samplingPresets are the presets in the order they are offered. Precise
// is greedy: the same answer every time, and what a small model memorised
// comes out as it was learnt. Balanced and Creative sample, with top-k,
// top-p and min-p keeping the draws among plausible tokens; Balanced adds a
// mild repeat penalty, as chat front ends commonly do, and Creative a
// higher temperature with a wider top-k.
func samplingPresets() []samplingPreset {
	return []samplingPreset{
		{presetPrecise, "Always the most likely token (greedy): the same answer every time.",
			engine.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1}},
		{presetBalanced, "Sampled at temperature 0.7 among likely tokens, with a mild repeat penalty.",
			engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.1}},
		{presetCreative, "Sampled at temperature 1.0 from a wider choice: more varied, less exact.",
			engine.Sampling{Temperature: 1.0, TopK: 100, TopP: 0.98, MinP: 0.02, RepeatPenalty: 1.05}},
	}
}

// findPreset is the preset called name (case-insensitive).
func findPreset(name string) (samplingPreset, error) {
	ps := samplingPresets()
	i := slices.IndexFunc(ps, func(p samplingPreset) bool { return strings.EqualFold(p.name, name) })
	if i < 0 {
		var names []string
		for _, p := range ps {
			names = append(names, p.name)
		}
		return samplingPreset{}, fmt.Errorf("app: no sampling preset %q (want %s)", name, strings.Join(names, ", "))
	}
	return ps[i], nil
}

// applyPreset sets the sampling settings from the preset called name; an
// unknown name changes nothing.
func (c *ChatSettings) applyPreset(name string) {
	p, err := findPreset(name)
	if err != nil {
		return
	}
	c.Preset = p.name
	c.Temperature, c.TopK, c.TopP, c.MinP, c.RepeatPenalty = p.s.Temperature, p.s.TopK, p.s.TopP, p.s.MinP, p.s.RepeatPenalty
}

// sampling is the engine's sampling for these settings.
func (c ChatSettings) sampling() engine.Sampling {
	return engine.Sampling{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP,
		RepeatPenalty: c.RepeatPenalty, Seed: c.Seed}
}
