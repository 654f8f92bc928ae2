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
// change. The file's name is the ID (see validID), whatever the file says.
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
	// ReadOnly marks a conversation written by a newer Tandem: shown, but
	// never saved over or deleted, which would lose what this build does
	// not know of it.
	ReadOnly bool `json:"-"`
}

var (
	errReadOnly = errors.New("app: the conversation was written by a newer version of Tandem and is read-only here")
	errBadID    = errors.New("app: not a conversation id")
)

// maxIDLen bounds a conversation id (a file name).
const maxIDLen = 128

// validID accepts the ids that name a file inside the conversations folder
// and nothing else: letters, digits, '.', '_' and '-', not starting with a
// dot. Ids come from file names and files can be put there by anyone, so
// every path is built from a checked id.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen || id[0] == '.' {
		return false
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
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
	DraftK       int     `json:"draft_k,omitempty"` // these four: engine.Stats' at the answer's end
	Drafting     bool    `json:"drafting,omitempty"`
	DraftOff     string  `json:"draft_off,omitempty"`
	Speedup      float64 `json:"speedup,omitempty"`
	FinishReason string  `json:"finish_reason,omitempty"`
	Model        string  `json:"model,omitempty"`
	// TTFTSeconds is the time from sending to the first text; PrefillTokS
	// the rate the prompt's PromptTokens were read at (0: not known, as
	// from a remote server).
	TTFTSeconds  float64 `json:"ttft_s,omitempty"`
	PromptTokens int     `json:"prompt_tokens,omitempty"`
	PrefillTokS  float64 `json:"prefill_tok_s,omitempty"`
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
	return &Conversation{Version: conversationVersion, Title: newChatTitle, Created: now, Updated: now, System: system}
}

func (s *store) conversationPath(id string) string {
	return filepath.Join(s.dir, conversationsDir, id+".json")
}

// saveConversation writes c and updates its ID, Revision and Updated. If
// another process saved the same conversation since c was read, c becomes a
// new conversation (a copy) so neither side's messages are lost; forked
// reports that.
func (s *store) saveConversation(c *Conversation) (forked bool, err error) {
	if c.ReadOnly {
		return false, errReadOnly
	}
	if c.ID != "" && !validID(c.ID) {
		return false, fmt.Errorf("%w: %q", errBadID, c.ID)
	}
	err = s.locked(func() error {
		if c.ID != "" {
			disk, err := readConversation(s.conversationPath(c.ID))
			switch {
			case errors.Is(err, errNewer) || err == nil && disk.ReadOnly:
				return errReadOnly
			case err == nil && disk.Revision > c.Revision:
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

// deletedDir holds deleted conversations until their Undo is no longer
// offered (purgeDeleted), beside conversations/ so listing that folder
// never sees them.
const deletedDir = "conversations-deleted"

func (s *store) deletedPath(id string) string {
	return filepath.Join(s.dir, deletedDir, id+".json")
}

// deleteConversation moves a saved conversation aside, where
// restoreConversation can bring it back until purgeDeleted removes it;
// one a newer Tandem wrote is refused. Its modification time becomes now,
// which purgeStaleDeleted goes by.
func (s *store) deleteConversation(id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: %q", errBadID, id)
	}
	return s.locked(func() error {
		p := s.conversationPath(id)
		if c, err := readConversation(p); errors.Is(err, errNewer) || err == nil && c.ReadOnly {
			return errReadOnly
		}
		if err := os.MkdirAll(filepath.Join(s.dir, deletedDir), 0o700); err != nil {
			return fmt.Errorf("app: %w", err)
		}
		err := os.Rename(p, s.deletedPath(id))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("app: %w", err)
		}
		now := s.now()
		return os.Chtimes(s.deletedPath(id), now, now)
	})
}

// errRestoreTaken is an Undo that finds a conversation of the same id
// saved since (by another window).
var errRestoreTaken = errors.New("app: another conversation was saved under its name since")

// restoreConversation undoes deleteConversation.
func (s *store) restoreConversation(id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: %q", errBadID, id)
	}
	return s.locked(func() error {
		if _, err := os.Stat(s.conversationPath(id)); err == nil {
			return errRestoreTaken
		}
		if err := os.Rename(s.deletedPath(id), s.conversationPath(id)); err != nil {
			return fmt.Errorf("app: restore %s: %w", id, err)
		}
		return nil
	})
}

// purgeDeleted removes a deleted conversation for good.
func (s *store) purgeDeleted(id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: %q", errBadID, id)
	}
	return s.locked(func() error {
		if err := os.Remove(s.deletedPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("app: %w", err)
		}
		return nil
	})
}

// purgeStaleDeleted removes the deleted conversations moved aside before
// since: their Undo ended with a window that closed without purging them
// (it crashed). Another window's recent ones are left to it.
func (s *store) purgeStaleDeleted(since time.Time) error {
	return s.locked(func() error {
		paths, err := filepath.Glob(filepath.Join(s.dir, deletedDir, "*.json"))
		if err != nil {
			return err
		}
		for _, p := range paths {
			if st, err := os.Stat(p); err == nil && st.ModTime().Before(since) {
				if err := os.Remove(p); err != nil {
					return fmt.Errorf("app: %w", err)
				}
			}
		}
		return nil
	})
}

// loadConversations reads every saved conversation, newest first, with a
// note for each file that is not listed as usual: one that cannot be read
// is set aside (renamed, never deleted) or, if even that fails, skipped;
// one from a newer Tandem is left in place and listed read-only when this
// build can read it. Only a folder that cannot be listed is an error.
func (s *store) loadConversations() (list []*Conversation, notes []string, err error) {
	err = s.locked(func() error {
		paths, err := filepath.Glob(filepath.Join(s.dir, conversationsDir, "*.json"))
		if err != nil {
			return err
		}
		for _, p := range paths {
			name := filepath.Base(p)
			c, why := readConversation(p)
			switch {
			case why == nil && c.ReadOnly:
				list = append(list, c)
				notes = append(notes, fmt.Sprintf("%s was written by a newer version of Tandem: it is shown read-only.", name))
			case why == nil:
				list = append(list, c)
			case errors.Is(why, errNewer):
				notes = append(notes, fmt.Sprintf("%s was written by a newer version of Tandem that this one cannot read (%v); it was left as it is.", name, why))
			default:
				note, err := s.keepAside(p, why)
				if err != nil {
					note = fmt.Sprintf("%s could not be used (%v) and could not be set aside (%v); it was left as it is.", name, why, err)
				}
				notes = append(notes, note)
			}
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

// readConversation reads one file. A file from a newer Tandem is returned
// ReadOnly if it decodes, else as an error wrapping errNewer; the ID is the
// file's name.
func readConversation(path string) (*Conversation, error) {
	id := strings.TrimSuffix(filepath.Base(path), ".json")
	if !validID(id) {
		return nil, fmt.Errorf("its name is not a conversation id (letters, digits, '.', '_', '-')")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	var c Conversation
	err = json.Unmarshal(b, &c)
	switch {
	case probe.Version > conversationVersion && err != nil:
		return nil, fmt.Errorf("schema version %d: %w", probe.Version, errNewer)
	case probe.Version > conversationVersion:
		c.ReadOnly = true
	case err != nil:
		return nil, fmt.Errorf("not a conversation: %w", err)
	case c.Version < 1:
		return nil, errors.New("not a conversation")
	}
	c.ID = id
	return &c, nil
}

// newChatTitle is the title of a conversation before its first message.
const newChatTitle = "New chat"

// matches reports whether the lower-case query q is in c's title or
// messages.
func (c *Conversation) matches(q string) bool {
	if strings.Contains(strings.ToLower(c.Title), q) {
		return true
	}
	for _, m := range c.Messages {
		if strings.Contains(strings.ToLower(m.Content), q) {
			return true
		}
	}
	return false
}

// titleFrom makes a conversation title from its first user message.
func titleFrom(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 48 {
		text = strings.TrimSpace(string(r[:47])) + "…"
	}
	if text == "" {
		return newChatTitle
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
	if m.TTFTSeconds > 0 {
		s += fmt.Sprintf(" · first token after %.2f s", m.TTFTSeconds)
	}
	if m.PrefillTokS > 0 {
		s += fmt.Sprintf(" · prompt %d tokens at %.0f tok/s", m.PromptTokens, m.PrefillTokS)
	}
	if m.FinishReason == "cancelled" {
		s += ", stopped"
	}
	if note := draftNote(m.DraftK, m.Drafting, m.DraftOff, m.Speedup); note != "" {
		s += " · " + note
	}
	return s
}
