package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// hfConfig is the part of a Hugging Face config.json the two families
// read; fields of either family's transformers releases (rope_theta or
// rope_parameters) are both accepted.
type hfConfig struct {
	ModelType        string   `json:"model_type"`
	VocabSize        int      `json:"vocab_size"`
	HiddenSize       int      `json:"hidden_size"`
	IntermediateSize int      `json:"intermediate_size"`
	Layers           int      `json:"num_hidden_layers"`
	Heads            int      `json:"num_attention_heads"`
	KVHeads          int      `json:"num_key_value_heads"`
	HeadDim          int      `json:"head_dim"`
	MaxPositions     int      `json:"max_position_embeddings"`
	RMSNormEps       float64  `json:"rms_norm_eps"`
	TieEmbeddings    *bool    `json:"tie_word_embeddings"`
	AttentionBias    bool     `json:"attention_bias"`
	HiddenAct        string   `json:"hidden_act"`
	HiddenActivation string   `json:"hidden_activation"`
	RopeTheta        float64  `json:"rope_theta"`
	RopeLocalBase    float64  `json:"rope_local_base_freq"`
	RopeParameters   rawDict  `json:"rope_parameters"`
	RopeScaling      rawDict  `json:"rope_scaling"`
	LayerTypes       []string `json:"layer_types"`

	// qwen3_moe
	MoEIntermediate   int   `json:"moe_intermediate_size"`
	Experts           int   `json:"num_experts"`
	LocalExperts      int   `json:"num_local_experts"` // transformers 5's spelling of num_experts
	ExpertsUsed       int   `json:"num_experts_per_tok"`
	NormTopKProb      bool  `json:"norm_topk_prob"`
	DecoderSparseStep int   `json:"decoder_sparse_step"`
	MLPOnlyLayers     []int `json:"mlp_only_layers"`
	SharedExpert      int   `json:"shared_expert_intermediate_size"`

	// gemma3_text
	QueryPreAttnScalar float64  `json:"query_pre_attn_scalar"`
	SlidingWindow      int      `json:"sliding_window"`
	FinalSoftcap       *float64 `json:"final_logit_softcapping"`
	AttnSoftcap        *float64 `json:"attn_logit_softcapping"`
}

type rawDict map[string]json.RawMessage

func readConfig(path string) (*hfConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c hfConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.Layers},
		{"num_attention_heads", c.Heads}, {"max_position_embeddings", c.MaxPositions},
	} {
		if v.n <= 0 || v.n > 1<<24 {
			return nil, fmt.Errorf("config: %s: %s = %d", path, v.name, v.n)
		}
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("config: %s: %d heads over %d KV heads", path, c.Heads, c.KVHeads)
	}
	if c.Experts == 0 {
		c.Experts = c.LocalExperts
	}
	if c.RMSNormEps <= 0 {
		return nil, fmt.Errorf("config: %s: rms_norm_eps %g", path, c.RMSNormEps)
	}
	return &c, nil
}

// ropeTheta is the RoPE base of layers of kind ("" for a model with one
// kind): from rope_parameters (transformers 5) or rope_theta and
// rope_local_base_freq (4.x). Only plain RoPE is converted.
func (c *hfConfig) ropeTheta(kind string, fallback float64) (float64, error) {
	params := c.RopeParameters
	if kind != "" && params != nil {
		sub, ok := params[kind]
		if !ok {
			return 0, fmt.Errorf("config: rope_parameters has no %q entry", kind)
		}
		params = nil
		if err := json.Unmarshal(sub, &params); err != nil {
			return 0, fmt.Errorf("config: rope_parameters[%q]: %w", kind, err)
		}
	}
	if params != nil {
		var typ string
		if raw, ok := params["rope_type"]; ok {
			if err := json.Unmarshal(raw, &typ); err != nil {
				return 0, fmt.Errorf("config: rope_type: %w", err)
			}
		}
		if typ != "" && typ != "default" {
			return 0, fmt.Errorf("config: rope_type %q: only plain RoPE is converted", typ)
		}
		var theta float64
		if raw, ok := params["rope_theta"]; ok {
			if err := json.Unmarshal(raw, &theta); err != nil {
				return 0, fmt.Errorf("config: rope_theta: %w", err)
			}
			return checkTheta(theta)
		}
	}
	if len(c.RopeScaling) > 0 {
		return 0, fmt.Errorf("config: rope_scaling: only plain RoPE is converted")
	}
	switch {
	case kind == "sliding_attention" && c.RopeLocalBase > 0:
		return checkTheta(c.RopeLocalBase)
	case kind != "sliding_attention" && c.RopeTheta > 0:
		return checkTheta(c.RopeTheta)
	}
	return checkTheta(fallback)
}

func checkTheta(v float64) (float64, error) {
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("config: rope theta %g", v)
	}
	return v, nil
}
