package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Sort orders search results, most first.
type Sort string

const (
	SortDownloads Sort = "downloads"
	SortLikes     Sort = "likes"
	SortUpdated   Sort = "lastModified"
	SortTrending  Sort = "trendingScore"
)

// ParseSort reads a sort name as the command line and the window give it.
func ParseSort(s string) (Sort, error) {
	switch s {
	case "", "downloads":
		return SortDownloads, nil
	case "likes":
		return SortLikes, nil
	case "updated", "lastModified":
		return SortUpdated, nil
	case "trending":
		return SortTrending, nil
	}
	return "", fmt.Errorf("hub: sort %q: want downloads, likes, updated or trending", s)
}

// Query is a search for model repositories that hold GGUF files.
type Query struct {
	Text  string
	Sort  Sort // "" is SortDownloads
	Limit int  // 0 is 20
}

// Repo is one search result.
type Repo struct {
	ID           string    `json:"id"`
	Downloads    int64     `json:"downloads"` // last 30 days
	Likes        int64     `json:"likes"`
	LastModified time.Time `json:"lastModified"`
	Tags         []string  `json:"tags,omitempty"`
	// Gated is "", "auto" or "manual": gated repositories need a token and
	// the user's acceptance of their terms.
	Gated gated `json:"gated,omitempty"`
}

// gated reads the Hub's "gated" field: false, or the kind of approval.
type gated string

func (g *gated) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*g = gated(s)
		return nil
	}
	var on bool
	if err := json.Unmarshal(b, &on); err != nil {
		return err
	}
	if on {
		*g = "yes"
	} else {
		*g = ""
	}
	return nil
}

// maxListBytes caps a JSON answer: a repository listing of thousands of
// files is a few MB.
const maxListBytes = 64 << 20

// Search lists model repositories with GGUF files that match q.
func (c *Client) Search(ctx context.Context, q Query) ([]Repo, error) {
	v := url.Values{"filter": {"gguf"}, "direction": {"-1"}}
	if q.Text != "" {
		v.Set("search", q.Text)
	}
	sort := q.Sort
	if sort == "" {
		sort = SortDownloads
	}
	v.Set("sort", string(sort))
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	v.Set("limit", strconv.Itoa(limit))
	var repos []Repo
	if err := c.getJSON(ctx, c.cfg.Endpoint+"/api/models?"+v.Encode(), "search "+strconv.Quote(q.Text), &repos); err != nil {
		return nil, err
	}
	return repos, nil
}

// getJSON GETs u and decodes its JSON body into out.
func (c *Client) getJSON(ctx context.Context, u, what string, out any) error {
	resp, err := c.send(ctx, http.MethodGet, u, http.Header{"Accept": {"application/json"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp, what)
	}
	dec := json.NewDecoder(&limitedReader{r: resp.Body, n: maxListBytes})
	if err := dec.Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("hub: %s: the answer is not the JSON the Hub sends: %w: %w", what, ErrServer, err)
	}
	return nil
}
