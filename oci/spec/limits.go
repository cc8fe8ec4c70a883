package spec

import (
	"fmt"
	"strconv"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Lengths past which the kernel refuses a value anyway, checked before the
// value reaches libcontainer, whose errors quote it whole (an image decides
// these strings): a path (the executable, the working directory) of
// PATH_MAX bytes or more, an argument or environment entry over
// MAX_ARG_STRLEN, a user or group name over LOGIN_NAME_MAX.
const (
	maxPath    = 4096      // PATH_MAX, with its terminating NUL
	maxArg     = 32 * 4096 // MAX_ARG_STRLEN
	maxName    = 256       // LOGIN_NAME_MAX
	maxShownAt = 120       // what an error shows of a value, as manifest's showValue
)

// shorten is s for an error: its first maxShownAt bytes and its length
// when it is longer.
func shorten(s string) string {
	if len(s) <= maxShownAt {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", podspec.Truncate(s, maxShownAt), len(s))
}

// show is shorten quoted.
func show(s string) string {
	if len(s) <= maxShownAt {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(podspec.Truncate(s, maxShownAt)), len(s))
}
