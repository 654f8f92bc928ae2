package app

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestConversationSaveLoad(t *testing.T) {
	s := newTestStore(t)
	c := s.newConversation("Be brief.")
	c.Messages = []Message{{Role: "user", Content: "Quote Genesis 1:3."}}
	c.Title = titleFrom(c.Messages[0].Content)
	if _, err := s.saveConversation(c); err != nil {
		t.Fatal(err)
	}
	c.Messages = append(c.Messages, Message{Role: "assistant", Content: "And God said, Let there be light.",
		Stats: &MessageStats{Tokens: 9, TokS: 120, Drafted: 8, Accepted: 6}})
	if _, err := s.saveConversation(c); err != nil {
		t.Fatal(err)
	}
	list, notes, err := s.loadConversations()
	if err != nil || len(notes) != 0 {
		t.Fatalf("notes %v, err %v", notes, err)
	}
	if len(list) != 1 {
		t.Fatalf("%d conversations, want 1", len(list))
	}
	got := list[0]
	if got.ID != c.ID || got.Revision != 2 || len(got.Messages) != 2 || got.System != "Be brief." {
		t.Errorf("reloaded %+v", got)
	}
	if got.Messages[1].Stats == nil || got.Messages[1].Stats.Accepted != 6 {
		t.Errorf("stats lost: %+v", got.Messages[1])
	}
}

// Two windows with the same conversation open: the later save becomes a
// copy, so both versions survive.
func TestConversationConcurrentEditsFork(t *testing.T) {
	s := newTestStore(t)
	c := s.newConversation("")
	c.Messages = []Message{{Role: "user", Content: "hello"}}
	if _, err := s.saveConversation(c); err != nil {
		t.Fatal(err)
	}
	a, b := *c, *c
	a.Messages = append(a.Messages[:1:1], Message{Role: "assistant", Content: "from window A"})
	b.Messages = append(b.Messages[:1:1], Message{Role: "assistant", Content: "from window B"})
	if forked, err := s.saveConversation(&a); err != nil || forked {
		t.Fatalf("first save: forked %v, err %v", forked, err)
	}
	forked, err := s.saveConversation(&b)
	if err != nil || !forked {
		t.Fatalf("second save: forked %v, err %v", forked, err)
	}
	if b.ID == a.ID || !strings.HasSuffix(b.Title, "(copy)") {
		t.Errorf("fork kept ID %q title %q", b.ID, b.Title)
	}
	list, _, _ := s.loadConversations()
	var texts []string
	for _, c := range list {
		texts = append(texts, c.Messages[len(c.Messages)-1].Content)
	}
	if len(list) != 2 || !strings.Contains(strings.Join(texts, "|"), "from window A") || !strings.Contains(strings.Join(texts, "|"), "from window B") {
		t.Errorf("conversations after both saves: %v", texts)
	}
}

// Many new conversations saved at once from two processes get distinct files.
func TestConversationConcurrentNew(t *testing.T) {
	s := newTestStore(t)
	other := &store{dir: s.dir, now: s.now} // same clock: same creation times
	var wg sync.WaitGroup
	for _, st := range []*store{s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				c := st.newConversation("")
				c.Messages = []Message{{Role: "user", Content: "x"}}
				if _, err := st.saveConversation(c); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	list, _, err := s.loadConversations()
	if err != nil || len(list) != 20 {
		t.Fatalf("%d conversations (err %v), want 20", len(list), err)
	}
}

func TestConversationCorruptKeptAside(t *testing.T) {
	s := newTestStore(t)
	good := s.newConversation("")
	if _, err := s.saveConversation(good); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(s.dir, conversationsDir, "broken.json")
	os.WriteFile(bad, []byte("{not json"), 0o600)
	list, notes, err := s.loadConversations()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(notes) != 1 || !strings.Contains(notes[0], "broken.json") {
		t.Errorf("list %d, notes %v", len(list), notes)
	}
	if m, _ := filepath.Glob(bad + ".unreadable-*"); len(m) != 1 {
		t.Errorf("corrupt file not kept aside: %v", m)
	}
}

func TestConversationDelete(t *testing.T) {
	s := newTestStore(t)
	c := s.newConversation("")
	s.saveConversation(c)
	if err := s.deleteConversation(c.ID); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := s.loadConversations(); len(list) != 0 {
		t.Errorf("%d conversations after delete", len(list))
	}
	if err := s.deleteConversation(c.ID); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
}

func TestConversationMarkdown(t *testing.T) {
	s := newTestStore(t)
	c := s.newConversation("You are a helpful assistant.")
	c.Title = "Genesis"
	c.Messages = []Message{
		{Role: "user", Content: "Quote Genesis 1:3."},
		{Role: "assistant", Content: "```\nAnd God said\n```\n", Stats: &MessageStats{Tokens: 4, TokS: 50, Drafted: 4, Accepted: 3}},
	}
	md := c.markdown()
	for _, want := range []string{"# Genesis", "**System:** You are a helpful assistant.", "## You\n\nQuote Genesis 1:3.", "## Assistant\n\n```\nAnd God said\n```\n\n", "drafted 4, accepted 3 (75%)"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestTitleFrom(t *testing.T) {
	for in, want := range map[string]string{
		"  Quote\nGenesis   1:3. ": "Quote Genesis 1:3.",
		"":                         "New chat",
		strings.Repeat("ab ", 40):  strings.TrimSpace(strings.Repeat("ab ", 16)[:47]) + "…",
	} {
		if got := titleFrom(in); got != want {
			t.Errorf("titleFrom(%q) = %q, want %q", in, got, want)
		}
	}
}
