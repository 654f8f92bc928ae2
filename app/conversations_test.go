package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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

// writeConversationFile puts a conversation file in the folder as another
// program (or another Tandem) would.
func writeConversationFile(t *testing.T, s *store, name, content string) string {
	t.Helper()
	p := filepath.Join(s.dir, conversationsDir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A file that cannot be read nor set aside (a read-only folder) is skipped
// with a note; the good conversations are still listed.
func TestConversationUnmovableFileSkipped(t *testing.T) {
	s := newTestStore(t)
	for range 2 {
		c := s.newConversation("")
		c.Messages = []Message{{Role: "user", Content: "good"}}
		if _, err := s.saveConversation(c); err != nil {
			t.Fatal(err)
		}
	}
	bad := writeConversationFile(t, s, "broken.json", "{not json")
	dir := filepath.Join(s.dir, conversationsDir)
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o500)
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	} else { // permissions do not stop root: fail the rename itself
		s.rename = func(string, string) error { return &os.LinkError{Op: "rename", Err: os.ErrPermission} }
	}
	list, notes, err := s.loadConversations()
	if err != nil || len(list) != 2 {
		t.Fatalf("%d conversations listed, err %v; want the 2 good ones", len(list), err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "broken.json") || !strings.Contains(notes[0], "could not be set aside") {
		t.Errorf("notes %q", notes)
	}
	if b, _ := os.ReadFile(bad); string(b) != "{not json" {
		t.Errorf("the bad file now holds %q", b)
	}
}

// A conversation from a newer Tandem stays where it is and is listed
// read-only: it is neither renamed, nor saved over, nor deleted.
func TestConversationNewerShownReadOnly(t *testing.T) {
	s := newTestStore(t)
	const newer = `{"version": 2, "id": "20990101-000000", "title": "From the future", "updated": "2099-01-01T00:00:00Z",
  "messages": [{"role": "user", "content": "hi", "attachments": ["x"]}], "branches": {}}`
	p := writeConversationFile(t, s, "20990101-000000.json", newer)
	// One whose messages this build cannot even decode is left in place too.
	alien := writeConversationFile(t, s, "20990101-000001.json", `{"version": 3, "messages": {"tree": true}}`)
	list, notes, err := s.loadConversations()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !list[0].ReadOnly || list[0].Title != "From the future" || len(list[0].Messages) != 1 {
		t.Fatalf("listed %+v", list)
	}
	if len(notes) != 2 || !strings.Contains(strings.Join(notes, "\n"), "read-only") {
		t.Errorf("notes %q", notes)
	}
	c := list[0]
	c.Messages = append(c.Messages, Message{Role: "assistant", Content: "overwritten"})
	if _, err := s.saveConversation(c); !errors.Is(err, errReadOnly) {
		t.Errorf("saving it: %v, want errReadOnly", err)
	}
	if err := s.deleteConversation(c.ID); !errors.Is(err, errReadOnly) {
		t.Errorf("deleting it: %v, want errReadOnly", err)
	}
	for path, want := range map[string]string{p: newer, alien: `{"version": 3, "messages": {"tree": true}}`} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s now: %q, %v", filepath.Base(path), b, err)
		}
	}
	if aside, _ := filepath.Glob(p + ".*"); len(aside) != 0 {
		t.Errorf("kept aside: %v", aside)
	}
	// The next start lists it again.
	if list, _, _ := s.loadConversations(); len(list) != 1 {
		t.Errorf("second load: %d conversations", len(list))
	}
}

// A conversation's id is its file's name: an id in the file that climbs
// out of the folder is not used, and ids that are not safe file names are
// refused by save and delete.
func TestConversationIDsStayInTheFolder(t *testing.T) {
	root := t.TempDir()
	s, err := openStore(filepath.Join(root, "config", "tandem"), testClock())
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(root, "config", "victim.json") // conversations/../../victim.json
	os.WriteFile(victim, []byte("precious"), 0o600)
	writeConversationFile(t, s, "20260301-120000.json", `{"version": 1, "id": "../../victim", "title": "t", "messages": [{"role": "user", "content": "x"}]}`)
	list, _, err := s.loadConversations()
	if err != nil || len(list) != 1 {
		t.Fatalf("%d conversations, %v", len(list), err)
	}
	c := list[0]
	if c.ID != "20260301-120000" {
		t.Errorf("id %q, want the file's name", c.ID)
	}
	c.Messages = append(c.Messages, Message{Role: "assistant", Content: "y"})
	if _, err := s.saveConversation(c); err != nil {
		t.Fatal(err)
	}
	if err := s.deleteConversation(c.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../../victim", "../victim", "a/b", `a\b`, "..", ".hidden", "", strings.Repeat("a", 200), "nul\x00"} {
		if _, err := s.saveConversation(&Conversation{ID: id, Version: 1, Revision: 0}); id != "" && !errors.Is(err, errBadID) {
			t.Errorf("save with id %q: %v", id, err)
		}
		if err := s.deleteConversation(id); !errors.Is(err, errBadID) {
			t.Errorf("delete with id %q: %v", id, err)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("victim.json: %q, %v", b, err)
	}
	if names, _ := filepath.Glob(filepath.Join(s.dir, conversationsDir, "*")); len(names) != 1 { // the one saved with id ""
		t.Errorf("folder holds %v", names)
	}
}

// A deleted conversation waits aside for its Undo: restoring brings it
// back unless another was saved under its name since; purging removes it;
// ones a crashed window left are removed at the next start once stale.
func TestConversationDeleteUndoPurge(t *testing.T) {
	s := newTestStore(t)
	c := s.newConversation("")
	c.Messages = []Message{{Role: "user", Content: "hi"}}
	s.saveConversation(c)
	if err := s.deleteConversation(c.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.restoreConversation(c.ID); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := s.loadConversations(); len(list) != 1 || list[0].Messages[0].Content != "hi" {
		t.Fatalf("restored %v", list)
	}
	s.deleteConversation(c.ID)
	other := &Conversation{Version: 1, ID: c.ID, Title: "other"}
	if _, err := s.saveConversation(other); err != nil {
		t.Fatal(err)
	}
	if err := s.restoreConversation(c.ID); !errors.Is(err, errRestoreTaken) {
		t.Errorf("restore over a newer file: %v", err)
	}
	if err := s.purgeDeleted(c.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.restoreConversation(c.ID); err == nil {
		t.Error("restored a purged conversation")
	}
	s.deleteConversation(other.ID) // moved aside at the test clock's now
	if err := s.purgeStaleDeleted(s.now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(filepath.Join(s.dir, deletedDir, "*")); len(aside) != 1 {
		t.Errorf("a recent deletion was purged: %v", aside)
	}
	s.purgeStaleDeleted(s.now().Add(time.Hour))
	if aside, _ := filepath.Glob(filepath.Join(s.dir, deletedDir, "*")); len(aside) != 0 {
		t.Errorf("a stale deletion stayed: %v", aside)
	}
}
