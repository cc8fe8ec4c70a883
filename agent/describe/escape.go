package describe

import (
	"fmt"
	"strings"
	"unicode"
)

// OneLine folds s onto one line of at most n runes, its control characters
// shown escaped: containers decide much of what it prints (kubectl's
// printers.EscapeTerminal, for CVE-2021-25743).
func OneLine(s string, n int) string {
	s = Escape(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// Escape writes each control character of s (C0, DEL, C1) as an escape, so
// that a terminal shows it rather than obeys it.
func Escape(s string) string { return EscapeBut(s, "") }

// EscapeBut is Escape leaving the characters of keep ("\n\t" for a text of
// several lines) as they are.
func EscapeBut(s, keep string) string {
	escape := func(r rune) bool { return unicode.IsControl(r) && !strings.ContainsRune(keep, r) }
	if !strings.ContainsFunc(s, escape) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !escape(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}
