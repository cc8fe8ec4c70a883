package exec

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// TestCommandErrorOfANameNotUTF8: the setns init's "not found" of a command
// whose name is not UTF-8 comes with each bad byte as U+FFFD (its error
// crossed JSON); it is still a command not found (exit 127), not a failure.
func TestCommandErrorOfANameNotUTF8(t *testing.T) {
	for _, name := range []string{"no-such", "\x1b]0;x\x07", "a\xff\xfeb", "\xc2\x85x\xed\xa0\x80"} {
		asJSON := string([]rune(name))
		for _, said := range []string{name, asJSON} {
			err := fmt.Errorf("unable to start container process: exec: %s: executable file not found in $PATH", strconv.Quote(said))
			if got := commandError(err, name); !errors.Is(got, podspec.ErrCommandNotFound) {
				t.Errorf("name %q, said as %q: %v; want command not found", name, said, got)
			}
		}
	}
	other := errors.New(`unable to start container process: exec: "other": executable file not found in $PATH`)
	if got := commandError(other, "a\xffb"); errors.Is(got, podspec.ErrCommandNotFound) {
		t.Errorf("another command's error taken for this one's: %v", got)
	}
}
