package hub

import (
	"os"
	"path/filepath"
	"strings"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// Config is where the Hub is, who we are to it, and where files go.
type Config struct {
	Endpoint string // no trailing slash
	Token    string // "" for anonymous requests
	// TokenFrom says where Token came from ("HF_TOKEN", a file path), for
	// messages; TokenFile is where a token file is looked for.
	TokenFrom, TokenFile string
	Cache                string // the hub cache: models--OWNER--NAME folders
	Offline              bool   // HF_HUB_OFFLINE: the cache only, no requests
}

// ConfigFromEnv reads the Hub's environment variables as its own tools do:
// HF_ENDPOINT; HF_TOKEN, else the token file (HF_TOKEN_PATH, default
// $HF_HOME/token); HF_HUB_CACHE, else $HF_HOME/hub with HF_HOME defaulting
// to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface; HF_HUB_OFFLINE.
// getenv is os.Getenv outside tests.
func ConfigFromEnv(getenv func(string) string) Config {
	home := getenv("HOME")
	expand := func(p string) string {
		if p == "~" || strings.HasPrefix(p, "~/") {
			p = filepath.Join(home, p[1:])
		}
		return p
	}
	c := Config{Endpoint: strings.TrimRight(getenv("HF_ENDPOINT"), "/")}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	hfHome := expand(getenv("HF_HOME"))
	if hfHome == "" {
		cache := expand(getenv("XDG_CACHE_HOME"))
		if cache == "" {
			cache = filepath.Join(home, ".cache")
		}
		hfHome = filepath.Join(cache, "huggingface")
	}
	c.Cache = expand(firstSet(getenv("HF_HUB_CACHE"), getenv("HUGGINGFACE_HUB_CACHE")))
	if c.Cache == "" {
		c.Cache = filepath.Join(hfHome, "hub")
	}
	c.TokenFile = expand(getenv("HF_TOKEN_PATH"))
	if c.TokenFile == "" {
		c.TokenFile = filepath.Join(hfHome, "token")
	}
	for _, name := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(getenv(name)); t != "" {
			c.Token, c.TokenFrom = t, name
			break
		}
	}
	if c.Token == "" {
		if b, err := os.ReadFile(c.TokenFile); err == nil && strings.TrimSpace(string(b)) != "" {
			c.Token, c.TokenFrom = strings.TrimSpace(string(b)), c.TokenFile
		}
	}
	c.Offline = isTrue(getenv("HF_HUB_OFFLINE")) || isTrue(getenv("TRANSFORMERS_OFFLINE"))
	return c
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// isTrue reads a boolean variable as the Hub's tools do.
func isTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}
