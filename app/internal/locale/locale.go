// Package locale keeps Fyne from logging "Error parsing user locale C" on
// every start (of the window and of every headless command) on machines
// whose locale is the C/POSIX one with an encoding, such as LANG=C.UTF-8
// in containers and CI: Fyne takes the "C" as a language tag and cannot
// parse it. English is what such a locale means, so LANGUAGE=en is set
// when nothing better is.
//
// It must run before Fyne's lang package initialises, which reads the
// locale in its init. Go initialises a package only after everything it
// imports, and among packages ready at once the lexically smallest import
// path first; this package imports only os and strings, so it runs before
// fyne.io/fyne/v2/lang, which waits on golang.org/x/text. app imports it
// for that side effect alone.
package locale

import (
	"os"
	"strings"
)

func init() {
	if os.Getenv("LANGUAGE") != "" {
		return
	}
	if IsPOSIX(Current()) {
		os.Setenv("LANGUAGE", "en")
	}
}

// Current is the locale the C library would use for messages: the first of
// LC_ALL, LC_MESSAGES and LANG that is set.
func Current() string {
	for _, env := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	return ""
}

// IsPOSIX reports whether loc is the C/POSIX locale with an encoding or
// modifier ("C.UTF-8", "POSIX@x"); the bare "C" and "POSIX" are left alone,
// since Fyne already treats them as English.
func IsPOSIX(loc string) bool {
	for _, base := range []string{"C", "POSIX"} {
		if rest, ok := strings.CutPrefix(loc, base); ok && rest != "" && (rest[0] == '.' || rest[0] == '@') {
			return true
		}
	}
	return false
}
