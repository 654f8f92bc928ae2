package serve

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// handler, a generation or a connection that outlived its request.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitBriefly yields while a test polls for a state another goroutine
// reaches; it bounds nothing (tests time out as a whole).
func waitBriefly() { time.Sleep(time.Millisecond) }
