package app

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// conversationVersion is the schema of one conversation file.
const conversationVersion = 1

const conversationsDir = "conversations"

// Conversation is one chat, saved as conversations/ID.json after every
// change.
type Conversation struct {
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Revision counts saves. A save that finds a higher revision on disk
	// (another window changed the same conversation) is written as a copy.
	Revision int       `json:"revision"`
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
}

// Message is one turn.
type Message struct {
	Role    string        `json:"role"` // "user" or "assistant"
	Content string        `json:"content"`
	Stats   *MessageStats `json:"stats,omitempty"`
}

// MessageStats are an assistant message's generation numbers.
type MessageStats struct {
	Tokens       int     `json:"tokens"`
	TokS         float64 `json:"tok_s"`
	Drafted      int     `json:"drafted"`
	Accepted     int     `json:"accepted"`
	FinishReason string  `json:"finish_reason,omitempty"`
	Model        string  `json:"model,omitempty"`
}

// Acceptance is accepted/drafted, 0 without drafts.
func (m MessageStats) Acceptance() float64 {
	if m.Drafted == 0 {
		return 0
	}
	return float64(m.Accepted) / float64(m.Drafted)
}

// newConversation starts an unsaved conversation (ID is given on first save).
func (s *store) newConversation(system string) *Conversation {
	now := s.now()
	return &Conversation{Version: conversationVersion, Title: "New chat", Created: now, Updated: now, System: system}
}

func (s *store) conversationPath(id string) string {
	return filepath.Join(s.dir, conversationsDir, id+".json")
}

// saveConversation writes c and updates its ID, Revision and Updated. If
// another process saved the same conversation since c was read, c becomes a
// new conversation (a copy) so neither side's messages are lost; forked
// reports that.
func (s *store) saveConversation(c *Conversation) (forked bool, err error) {
	err = s.locked(func() error {
		if c.ID != "" {
			disk, err := readConversation(s.conversationPath(c.ID))
			if err == nil && disk.Revision > c.Revision {
				c.ID, forked = "", true
				c.Title += " (copy)"
			}
		}
		if c.ID == "" {
			c.ID = s.freeID(c.Created)
		}
		c.Version = conversationVersion
		c.Revision++
		c.Updated = s.now()
		return writeJSON(s.conversationPath(c.ID), c)
	})
	return forked, err
}

// freeID names a new conversation after its creation time, unique in the
// folder (the caller holds the lock).
func (s *store) freeID(created time.Time) string {
	base := created.UTC().Format("20060102-150405")
	id := base
	for i := 2; ; i++ {
		if _, err := os.Stat(s.conversationPath(id)); errors.Is(err, fs.ErrNotExist) {
			return id
		}
		id = fmt.Sprintf("%s-%d", base, i)
	}
}

// deleteConversation removes a saved conversation.
func (s *store) deleteConversation(id string) error {
	return s.locked(func() error {
		err := os.Remove(s.conversationPath(id))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
}

// loadConversations reads every saved conversation, newest first. Files
// that cannot be read are kept aside, each with a note.
func (s *store) loadConversations() (list []*Conversation, notes []string, err error) {
	err = s.locked(func() error {
		paths, err := filepath.Glob(filepath.Join(s.dir, conversationsDir, "*.json"))
		if err != nil {
			return err
		}
		for _, p := range paths {
			c, why := readConversation(p)
			if why == nil {
				list = append(list, c)
				continue
			}
			note, err := s.keepAside(p, why)
			if err != nil {
				return err
			}
			notes = append(notes, note)
		}
		return nil
	})
	slices.SortFunc(list, func(a, b *Conversation) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return list, notes, err
}

func readConversation(path string) (*Conversation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Conversation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	switch {
	case c.Version > conversationVersion:
		return nil, fmt.Errorf("schema version %d: %w", c.Version, errNewer)
	case c.Version < 1 || c.ID == "":
		return nil, errors.New("not a conversation")
	}
	return &c, nil
}

// titleFrom makes a conversation title from its first user message.
func titleFrom(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 48 {
		text = strings.TrimSpace(string(r[:47])) + "…"
	}
	if text == "" {
		return "New chat"
	}
	return text
}

// markdown is c as a Markdown document, for export.
func (c *Conversation) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", c.Title)
	fmt.Fprintf(&b, "_%s_\n\n", c.Created.Format("2 January 2006, 15:04"))
	if c.System != "" {
		fmt.Fprintf(&b, "**System:** %s\n\n", c.System)
	}
	for _, m := range c.Messages {
		who := "You"
		if m.Role == "assistant" {
			who = "Assistant"
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", who, strings.TrimRight(m.Content, "\n"))
		if st := m.Stats; st != nil {
			fmt.Fprintf(&b, "_%s_\n\n", st.summary())
		}
	}
	return b.String()
}

// summary is the one-line statistics under an assistant message.
func (m MessageStats) summary() string {
	s := fmt.Sprintf("%d tokens, %.1f tok/s", m.Tokens, m.TokS)
	if m.Drafted > 0 {
		s += fmt.Sprintf(", drafted %d, accepted %d (%.0f%%)", m.Drafted, m.Accepted, 100*m.Acceptance())
	}
	if m.FinishReason == "cancelled" {
		s += ", stopped"
	}
	return s
}
