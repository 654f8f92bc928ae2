package locale

import "testing"

func TestIsPOSIX(t *testing.T) {
	for loc, want := range map[string]bool{
		"C.UTF-8": true, "C.utf8": true, "POSIX.UTF-8": true, "C@euro": true,
		"C": false, "POSIX": false, "": false, "en_US.UTF-8": false, "Ca_ES.UTF-8": false,
	} {
		if got := IsPOSIX(loc); got != want {
			t.Errorf("IsPOSIX(%q) = %v, want %v", loc, got, want)
		}
	}
}
